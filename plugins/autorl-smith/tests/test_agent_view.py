"""What an agent sees of its smith benchmark under the real bwrap sandbox: the files it needs to load the
benchmark (config.yaml, eval.py, description.md, the exposed files), read-only, and nothing else of
``$SMITH_BENCH_DIR``: not its folder's data, not the other benchmarks, not the grader's copy; whatever it
writes there never reaches the host. Discovery in its process finds its own benchmark alone, and scores with it.

The folder of benchmarks lies outside the run's home and /tmp (which the sandbox masks anyway): where the
operator's would, say /srv, visible to the agent but for the masks under test."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from autorl_smith.benchmark import SmithBenchmark, version_of
from autorl_smith.folder import SmithFolder, discover, load_folder
from smith_folders import cli, write_folder

from autorl import Item, UsageError
from autorl.sandbox import bwrap_available

BWRAP, WHY = bwrap_available()

EXACT = (
    "def evaluate(question, model_answer, reference_answer, **kwargs):\n"
    "    return 1.0 if model_answer.strip() == reference_answer.strip() else 0.0\n"
)
PROBE = r"""
import json, os
from pathlib import Path

cfg = json.loads(os.environ["PROBE"])


def read(path):
    p = Path(path)
    try:
        return (sorted(x.name for x in p.iterdir()) if p.is_dir() else p.read_text()[:200]) or None
    except OSError:
        return None


def write(path):
    try:
        with open(path, "a") as f:
            f.write("agent was here\n")
        return "written"
    except OSError as exc:
        return type(exc).__name__


folder = Path(os.environ["SMITH_AGENT_FOLDER"])
out = {"folder": str(folder), "read": {p: read(p) for p in cfg["read"]}, "write": {p: write(p) for p in cfg["write"]},
       "shown": {n: read(folder / n) for n in ("config.yaml", "eval.py", "description.md", "hints.txt")}}
from autorl import Item
from autorl.plugins.registry import get_benchmark, get_benchmarks

out["benchmarks"] = sorted(n for n in get_benchmarks() if n.startswith("smith-"))
out["smith_env"] = sorted(k for k in os.environ if k.startswith("SMITH_"))
bench = get_benchmark(os.environ["TASK"])()
out["prompt"] = bench.config().render({"question": "2+2"})
out["scores"] = [bench.score(Item("x", {"question": "2+2"}, "4"), a) for a in ("4", "5")]
Path(os.environ["WORKSPACE"], "code", "probe.json").write_text(json.dumps(out))
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp and outside the run's home (the run gets a home of its own); not a hidden one of the
    home, which no benchmark may show its agent anything of."""
    path = Path(tempfile.mkdtemp(prefix="autorl-smith-test-", dir=Path.home())).resolve()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def rows(start: int, n: int, tag: str) -> list[dict[str, Any]]:
    return [{"question": f"{tag} {k} + {k}", "answer": str(2 * k)} for k in range(start, start + n)]


@pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")
@pytest.mark.parametrize("given", [False, True], ids=["discovered", "given-as-task"])
def test_the_agent_sees_its_own_folders_files_and_nothing_else(
    tmp_path: Path, outside: Path, given: bool, tiny_model: Path
) -> None:
    """The same for a folder found under SMITH_BENCH_DIR and for one given as ``--task /path/to/folder`` (no
    install, no SMITH_BENCH_DIR): the same benchmark, the same masks."""
    pytest.importorskip("torch", reason="the run's baseline needs the hf backend (autorl[hf])")
    root = outside / "benchmarks"
    own = write_folder(
        root,
        "probe",
        eval_py=EXACT,
        train=rows(0, 30, "TRAIN-PROBE"),
        test=rows(100, 12, "HIDDEN-PROBE"),
        config={"expose_files": ["hints.txt"], "prompt_template": "Q: {question}\nA:"},
        files={
            "description.md": "# Probe\n\nAdd.\n",
            "hints.txt": "answer with digits\n",
            "download_data.py": "# HIDDEN-DOWNLOAD: nothing to fetch\n",
        },
    )
    other = write_folder(
        root,
        "other",
        eval_py=EXACT,
        train=rows(0, 30, "TRAIN-OTHER"),
        test=rows(100, 12, "HIDDEN-OTHER"),
        files={"description.md": "# Other\n"},
    )
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    home = tmp_path / "home"
    agent = tmp_path / "probe-agent"
    agent.mkdir()
    (agent / "config.yaml").write_text("name: probe\nstart: start.sh\n")
    (agent / "start.sh").write_text('exec "$AUTORL_PYTHON" "$AUTORL_AGENT_DIR/probe.py"\n')
    (agent / "probe.py").write_text(PROBE)
    grader_copies = home / "autorl" / "hidden" / "smith"
    read = [
        own / "data",
        own / "data" / "test.jsonl",
        own / "data" / "train.jsonl",
        own / "download_data.py",
        other,
        other / "data" / "test.jsonl",
        other / "config.yaml",
        other / "eval.py",
        grader_copies,
    ]
    write = [own / "config.yaml", own / "eval.py", own / "new.txt", own / "data" / "test.jsonl", other / "eval.py"]
    probe = {"read": [str(p) for p in read], "write": [str(p) for p in write]}
    nowhere = tmp_path / "no-benchmarks"
    nowhere.mkdir()
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        str(own) if given else "smith-probe",
        "--model",
        str(tiny_model),
        "--timeout",
        "90",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--no-audit",
        "--json",
        "--agent-env",
        "PROBE=" + json.dumps(probe),
        env={
            "HOME": str(home),
            "AUTORL_HOME": str(home / "autorl"),
            "SMITH_BENCH_DIR": str(nowhere if given else root),
            "HF_HUB_OFFLINE": "1",
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout)
    ws = Path(row["workspace"])
    # recorded under the benchmark's name; a folder given as the task is kept beside it, to be taken again
    assert row["task"] == "smith-probe"
    assert json.loads((ws / "result.json").read_text())["meta"]["task_source"] == (str(own) if given else None)
    assert (ws / "code" / "probe.json").is_file(), (ws / "agent.log").read_text()[-3000:]
    seen = json.loads((ws / "code" / "probe.json").read_text())
    # what it may read to load the benchmark, from its own folder
    assert seen["folder"] == str(own)
    assert seen["shown"]["config.yaml"] and "def evaluate" in seen["shown"]["eval.py"]
    assert seen["shown"]["description.md"].startswith("# Probe") and seen["shown"]["hints.txt"]
    # nothing else of the folder of benchmarks: its data, the other benchmark, the grader's copy
    assert seen["read"] == {str(p): None for p in read}
    assert "HIDDEN" not in json.dumps(seen)
    # its writes fail where it can see the file, and none reaches the host
    assert seen["write"][str(own / "config.yaml")] != "written" and seen["write"][str(own / "eval.py")] != "written"
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    # discovery in its process: its own benchmark alone, from what it sees, scoring with its eval.py
    assert seen["benchmarks"] == ["smith-probe"]
    assert seen["prompt"] == "Q: 2+2\nA:" and seen["scores"] == [1.0, 0.0]
    # the grader scored from its own copy of the folder, made before the agent started
    assert list(grader_copies.glob("probe-*/eval.py")) and "smith-probe" in proc.stdout
    # the agent's process is told its own folder alone (never the orchestrator's list of folders)
    assert seen["smith_env"] == ["SMITH_AGENT_FOLDER"]


def smith_class(folder: SmithFolder) -> type[SmithBenchmark]:
    return type(
        f"Smith_{folder.name}",
        (SmithBenchmark,),
        {"name": folder.task, "version": version_of(folder), "folder": folder, "source": folder.path},
    )


def test_what_the_benchmark_shows_names_and_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "benchmarks"
    own = write_folder(
        root,
        "probe",
        eval_py=EXACT,
        train=rows(0, 30, "TRAIN"),
        test=rows(100, 12, "HIDDEN"),
        config={"expose_files": ["hints.txt"]},
        files={"description.md": "# Probe\n", "hints.txt": "digits\n", "download_data.py": "\n"},
    )
    bench = smith_class(load_folder(own))()
    assert bench.agent_paths() == [own / "config.yaml", own / "eval.py", own / "description.md", own / "hints.txt"]
    assert bench.agent_env() == {"SMITH_AGENT_FOLDER": str(own)}
    assert {root, own / "data", own / "data" / "test.jsonl"} <= set(bench.hidden_paths())
    assert bench.exposed_files() == {"hints.txt": own / "hints.txt"}  # the folder's own, not the grader's copy
    # an exposed file that is data, or a link to it, is refused in one line
    (own / "hint-link.txt").symlink_to(own / "data" / "test.jsonl")
    for exposed in ("data/train.jsonl", "data/test.jsonl", "hint-link.txt"):
        cfg = json.loads((own / "config.yaml").read_text())
        (own / "config.yaml").write_text(json.dumps({**cfg, "expose_files": [exposed]}))
        with pytest.raises(UsageError, match=rf"^smith-probe: config.yaml exposes '{exposed}', which is data"):
            smith_class(load_folder(own))().exposed_files()
    # the agent's view: its files alone (no data, nothing else) make the one benchmark it discovers
    seen = tmp_path / "seen" / "probe"
    seen.mkdir(parents=True)
    for name in ("config.yaml", "eval.py", "description.md", "hints.txt"):
        shutil.copyfile(own / name, seen / name)
    (seen / "config.yaml").write_text(json.dumps({**cfg, "expose_files": ["hints.txt"]}))
    monkeypatch.setenv("SMITH_BENCH_DIR", str(root))
    monkeypatch.setenv("SMITH_AGENT_FOLDER", str(seen))
    [folder] = discover()
    assert folder.agent_view and folder.path == seen
    agent_bench = smith_class(folder)()
    assert agent_bench.score(Item("x", {"question": "1 + 1"}, "2"), "2") == 1.0
    assert agent_bench.description().startswith("# Probe")
    with pytest.raises(UsageError, match=r"the agent's view of .* holds no data"):
        agent_bench.prepare_train_data(tmp_path / "train")
