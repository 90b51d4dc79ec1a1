"""``autorl export harbor``: the task directory it writes (no hidden item and no installation secret outside
``tests/``, autorl's own instructions, Harbor's separate-verifier mode) and the verifier that runs in it, which
scores only the agent's final checkpoint, with the grader's intake and evaluation, whatever the agent forged.

The checks that need the ``harbor`` package itself (Python >= 3.12) are in ``test_harbor_run.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomllib

from autorl.builtin.arith import Arith
from autorl.export.harbor import export
from autorl.export.harbor_cells import Scoring, TaskCell
from autorl.hidden import HIDDEN_SECRET_ENV, read_hidden_items
from autorl.resources import prepare_data
from autorl.runs.workspace import instructions

from .conftest import cli, write_stub_checkpoint

OPERATOR_SECRET = "ab" * 32


def _answers(task: Path, correct: int) -> dict[str, str]:
    """A scripted model's answers: the first ``correct`` exported test items right (read as the test's author)."""
    items = read_hidden_items("arith", task / "tests" / "hidden", "test")
    return {f"Q: {i.input['question']}\nA:": str(i.reference) for i in items[:correct]}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One export of arith (scored by the example plugin's scripted backend, so that a checkpoint's answers are
    what it says) and the installation's own arith data, prepared first in the same AUTORL_HOME."""
    root = tmp_path_factory.mktemp("export")
    home = root / "home"
    old = {k: os.environ.get(k) for k in ("AUTORL_HOME", HIDDEN_SECRET_ENV)}
    os.environ["AUTORL_HOME"] = str(home)
    os.environ.pop(HIDDEN_SECRET_ENV, None)
    try:
        installation = prepare_data(Arith(), home=home)
        base = write_stub_checkpoint(root / "base", answers={})
        os.environ[HIDDEN_SECRET_ENV] = OPERATOR_SECRET  # an operator's secret in force while exporting
        cells = [
            TaskCell(task="arith", model=str(base), timeout=120, backend="scripted"),
            TaskCell(task="arith", model=str(base), timeout=120, backend="scripted", limit=40),
        ]
        paths = export(root / "out", cells, Scoring(reward="beat-baseline"))
        secret_after = os.environ.get(HIDDEN_SECRET_ENV)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {
        "task": paths[0],
        "limited": paths[1],
        "installation": installation,
        "base": base,
        "secret_after": secret_after,
        "root": root,
    }


def _verify(
    task: Path, output: Path, logs: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The verifier as Harbor starts it (``tests/test.sh``'s command), on this machine's paths."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "autorl.export.verifier",
            str(task / "tests" / "verifier.json"),
            "--output-dir",
            str(output),
            "--logs-dir",
            str(logs),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_the_task_directory_is_harbors_format_with_a_separate_verifier(exported: dict[str, Any]) -> None:
    task: Path = exported["task"]
    assert (task.name, exported["limited"].name) == ("arith-base-120s", "arith-base-120s-40items")
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["schema_version"] == "1.4"
    assert config["verifier"]["environment_mode"] == "separate"
    assert config["verifier"]["environment"]["network_mode"] == "no-network"
    assert config["agent"] == {"timeout_sec": 120.0, "user": "agent"}
    assert config["artifacts"] == ["/app/output/final"]  # the only thing that crosses to the verifier
    spec = json.loads((task / "tests/verifier.json").read_text())
    assert config["metadata"]["hidden_items"] == spec["hidden_items"]
    assert spec["eval_timeout"] == config["verifier"]["timeout_sec"] / 2  # both evaluations end before Harbor's limit
    for name in ("instruction.md", "environment/Dockerfile", "tests/Dockerfile", "tests/test.sh"):
        assert (task / name).is_file(), name
    assert os.access(task / "tests/test.sh", os.X_OK)
    assert "autorl.export.verifier" in (task / "tests/test.sh").read_text()
    wheels = sorted(p.name for p in (task / "tests/wheels").iterdir())
    assert [w.split("-")[0] for w in wheels] == ["autorl", "autorl_example_plugin"]  # editable installs, built
    assert "./wheels/" in (task / "tests/requirements.txt").read_text()


def test_the_instruction_is_autorls_workspace_instructions(exported: dict[str, Any]) -> None:
    task: Path = exported["task"]
    bench = Arith()
    expected = instructions(bench, "base", 120, "", final_checkpoint="$OUTPUT_DIR/final")
    assert (task / "environment/workspace/instructions.md").read_text() == expected
    assert (task / "instruction.md").read_text() == bench.description().strip() + "\n\n" + expected
    assert "GRADING_SERVER_URL" not in expected and "$OUTPUT_DIR/final" in expected
    dockerfile = (task / "environment/Dockerfile").read_text()
    assert 'OUTPUT_DIR="/app/output"' in dockerfile and 'MODEL_PATH="/app/models/base"' in dockerfile


def test_no_hidden_item_and_no_secret_outside_tests(exported: dict[str, Any]) -> None:
    task: Path = exported["task"]
    hidden = task / "tests" / "hidden"
    items = [i for split in ("dev", "test") for i in read_hidden_items("arith", hidden, split)]
    assert len(items) == 800
    # description.md and instructions.md are the benchmark's and autorl's public text (checked above)
    public = {"description.md", "instructions.md"}
    text = "\n".join(p.read_text(errors="replace") for p in _files(task / "environment") if p.name not in public)
    leaked = [i.input["question"] for i in items if i.input["question"] in text]
    assert leaked == []
    assert (task / "environment/workspace/data/train.jsonl").stat().st_size > 0
    # the export drew its items with a fresh secret: neither the installation's nor the operator's is anywhere
    install_secret = (exported["installation"].hidden_dir / "secret").read_bytes()
    everything = b"".join(p.read_bytes() for p in _files(task))
    assert install_secret not in everything and install_secret.hex().encode() not in everything
    assert OPERATOR_SECRET.encode() not in everything and bytes.fromhex(OPERATOR_SECRET) not in everything
    own = read_hidden_items("arith", exported["installation"].hidden_dir, "test")
    assert {i.id for i in own} != {i.id for i in read_hidden_items("arith", hidden, "test")}
    assert exported["secret_after"] == OPERATOR_SECRET  # the caller's setting is back after the export


def test_the_verifier_scores_the_final_checkpoint_against_the_baseline(
    exported: dict[str, Any], tmp_path: Path
) -> None:
    task: Path = exported["task"]
    write_stub_checkpoint(tmp_path / "output" / "final", answers=_answers(task, 400))
    # an operator's secret where the verifier runs does not redraw the exported items
    proc = _verify(task, tmp_path / "output", tmp_path / "logs", env={HIDDEN_SECRET_ENV: "cd" * 32})
    assert proc.returncode == 0, proc.stderr
    reward = json.loads((tmp_path / "logs/reward.json").read_text())
    assert reward["baseline"] == 0.0 and reward["test_score"] == 80.0 and reward["n"] == 500
    assert reward["improvement"] == 80.0 and 0 < reward["improvement_ci95_low"] < 80 < reward["improvement_ci95_high"]
    assert reward["p_value"] < 0.05 and reward["reward"] == 1.0 and reward["checkpoint_valid"] == 1.0
    assert all(isinstance(v, float) for v in reward.values())  # Harbor takes numbers only
    detail = json.loads((tmp_path / "logs/autorl_result.json").read_text())
    assert detail["comparison"]["test"] == "mcnemar-exact" and detail["checkpoint"]["kind"] == "full"
    assert detail["final_record"]["config"]["hidden_items"] == detail["hidden_items"]


def test_forged_rewards_and_score_claims_are_ignored(exported: dict[str, Any], tmp_path: Path) -> None:
    task: Path = exported["task"]
    final = write_stub_checkpoint(tmp_path / "output" / "final", answers={})  # the base model's answers
    claim = {"reward": 1.0, "test_score": 100.0, "improvement": 100.0}
    for name in ("reward.json", "scores.json", "autorl_result.json", "result.json"):
        (final / name).write_text(json.dumps(claim))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "reward.json").write_text(json.dumps(claim))
    (logs / "reward.txt").write_text("1.0")
    (tmp_path / "output" / "scores.json").write_text(json.dumps(claim))
    proc = _verify(task, tmp_path / "output", logs)
    assert proc.returncode == 0, proc.stderr
    reward = json.loads((logs / "reward.json").read_text())
    assert reward["reward"] == 0.0 and reward["test_score"] == reward["baseline"] == 0.0
    assert reward["improvement"] == 0.0 and reward["p_value"] == 1.0
    assert not (logs / "reward.txt").exists()  # Harbor would read it if reward.json were ever missing


def _link_to_base(final: Path, base: Path) -> None:
    final.symlink_to(base, target_is_directory=True)


def _pickled(final: Path, base: Path) -> None:
    write_stub_checkpoint(final, answers={})
    (final / "pytorch_model.bin").write_bytes(b"\x80\x04K\x01.")


def _empty(final: Path, base: Path) -> None:
    final.mkdir()


@pytest.mark.parametrize(
    ("plant", "kind"),
    [
        (_link_to_base, "refused_outside_output"),
        (_pickled, "invalid_checkpoint"),
        (_empty, "invalid_checkpoint"),
        (None, "missing"),
    ],
)
def test_a_refused_or_missing_checkpoint_scores_nothing(
    exported: dict[str, Any], tmp_path: Path, plant: Any, kind: str
) -> None:
    output = tmp_path / "output"
    if plant is not None:
        output.mkdir()
        plant(output / "final", exported["base"])
    proc = _verify(exported["limited"], output, tmp_path / "logs")
    assert proc.returncode == 0, proc.stderr
    reward = json.loads((tmp_path / "logs/reward.json").read_text())
    assert reward == {"baseline": 0.0, "n": 40.0, "checkpoint_valid": 0.0, "reward": 0.0}
    detail = json.loads((tmp_path / "logs/autorl_result.json").read_text())
    assert detail["checkpoint"]["kind"] == kind and detail["final_record"] is None


def test_a_checkpoint_that_fails_to_evaluate_scores_nothing(exported: dict[str, Any], tmp_path: Path) -> None:
    write_stub_checkpoint(tmp_path / "output" / "final", answers={}, behaviour={"crash": True})
    proc = _verify(exported["limited"], tmp_path / "output", tmp_path / "logs")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "logs/reward.json").read_text())["reward"] == 0.0
    detail = json.loads((tmp_path / "logs/autorl_result.json").read_text())
    assert "refuses to load" in detail["checkpoint"]["evaluation_error"] and detail["final_record"] is None


def test_hidden_items_changed_after_the_export_write_no_reward(exported: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    task = tmp_path / "task"
    shutil.copytree(exported["limited"], task)
    items = task / "tests/hidden/test.items.jsonl"
    items.write_text("".join(items.read_text().splitlines(keepends=True)[1:]))
    write_stub_checkpoint(tmp_path / "output" / "final", answers={})
    proc = _verify(task, tmp_path / "output", tmp_path / "logs")
    assert proc.returncode == 1 and "not the exported ones" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "logs/reward.json").exists()  # Harbor records a verifier error, not a score


def test_score_reward_is_the_test_score(exported: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    task = tmp_path / "task"
    shutil.copytree(exported["limited"], task)
    spec = json.loads((task / "tests/verifier.json").read_text())
    (task / "tests/verifier.json").write_text(json.dumps({**spec, "reward": "score"}))
    write_stub_checkpoint(tmp_path / "output" / "final", answers=_answers(task, 10))
    assert _verify(task, tmp_path / "output", tmp_path / "logs").returncode == 0
    reward = json.loads((tmp_path / "logs/reward.json").read_text())
    assert reward["test_score"] == 25.0 and reward["reward"] == 0.25


def test_a_study_becomes_one_task_per_distinct_budget(tmp_path: Path, exported: dict[str, Any]) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'agent = ["example", "llm"]\ntask = "echo"\nmodel = "{exported["base"]}"\nseed = [0, 1, 2]\n'
        'timeout = [60, 90]\nbackend = "scripted"\n'
    )
    proc = cli("export", "harbor", "--study", str(spec), "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 0, proc.stderr
    paths = [Path(p) for p in json.loads(proc.stdout)]
    assert sorted(p.name for p in paths) == ["echo-base-60s", "echo-base-90s"]
    timeouts = sorted(tomllib.loads((p / "task.toml").read_text())["agent"]["timeout_sec"] for p in paths)
    assert timeouts == [60.0, 90.0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--task", "arith", "--model", "autorl:tiny"], "give --task, --model and --timeout"),
        (["--task", "aritm", "--model", "autorl:tiny", "--timeout", "60"], "did you mean 'arith'"),
        (["--task", "arith", "--model", "autorl:tiny", "--timeout", "-5"], "--timeout must be a positive"),
        (["--task", "arith", "--model", "autorl:tiny", "--timeout", "60", "--backend", "openai"], "external server"),
        (["--task", "arith", "--model", "autorl:tiny", "--timeout", "60", "--reward", "vibes"], "--reward must be"),
        (["--study", "x.toml", "--task", "arith"], "--study takes"),
    ],
)
def test_bad_options_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    proc = cli("export", "harbor", "--out", str(tmp_path / "out"), *args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_an_existing_task_directory_is_never_replaced(exported: dict[str, Any]) -> None:
    task: Path = exported["task"]
    before = (task / "task.toml").read_text()
    proc = cli(
        "export",
        "harbor",
        "--task",
        "arith",
        "--model",
        str(exported["base"]),
        "--timeout",
        "120",
        "--backend",
        "scripted",
        "--out",
        str(task.parent),
    )
    assert proc.returncode == 2 and "already exists" in proc.stderr
    assert (task / "task.toml").read_text() == before


def test_a_real_model_and_a_lora_adapter_go_through_the_hf_backend(tiny_model: Path, tmp_path: Path) -> None:
    from .conftest import write_lora

    [task] = export(tmp_path / "out", [TaskCell(task="arith", model=str(tiny_model), timeout=60, limit=20)], Scoring())
    assert (task / "tests/requirements.txt").read_text().startswith("./wheels/autorl-")
    assert "[hf]" in (task / "tests/requirements.txt").read_text()
    (tmp_path / "output").mkdir()
    write_lora(task / "tests" / "model", tmp_path / "output" / "final")
    proc = _verify(task, tmp_path / "output", tmp_path / "logs")
    assert proc.returncode == 0, proc.stderr
    reward = json.loads((tmp_path / "logs/reward.json").read_text())
    detail = json.loads((tmp_path / "logs/autorl_result.json").read_text())
    assert detail["checkpoint"]["kind"] == "lora" and reward["n"] == 20 and reward["checkpoint_valid"] == 1.0
    assert detail["baseline_record"]["config"]["backend"]["name"] == "hf"
    assert reward["improvement"] == pytest.approx(reward["test_score"] - reward["baseline"])


def test_a_distribution_travels_as_its_source_its_wheel_or_a_pin(tmp_path: Path) -> None:
    from importlib.metadata import PathDistribution

    from autorl.export.packages import local_source

    def dist(direct_url: dict[str, Any] | None) -> PathDistribution:
        info = tmp_path / f"d{len(list(tmp_path.iterdir()))}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: some-plugin\nVersion: 1.2.3+local\n")
        if direct_url is not None:
            (info / "direct_url.json").write_text(json.dumps(direct_url))
        return PathDistribution(info)

    project, wheel = tmp_path / "project", tmp_path / "some_plugin-1.2.3-py3-none-any.whl"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'some-plugin'\n")
    wheel.write_bytes(b"PK")
    assert local_source(dist({"url": project.as_uri(), "dir_info": {"editable": True}})) == project
    assert local_source(dist({"url": wheel.as_uri(), "archive_info": {}})) == wheel
    assert local_source(dist({"url": (tmp_path / "gone.whl").as_uri(), "archive_info": {}})) is None
    assert local_source(dist({"url": "https://example.org/x.whl", "archive_info": {}})) is None
    assert local_source(dist(None)) is None


def test_gpus_network_and_reward_reach_the_task_config() -> None:
    from autorl.export.harbor import _task_toml
    from autorl.export.verifier import VerifierSpec

    cell = TaskCell(
        task="arith",
        model="org/Model-1B@main",
        timeout=3600,
        gpus=2,
        network="off",
        benchmark_options={"chat_template": True},
    )
    spec = VerifierSpec(task="arith", base_model_name="org/Model-1B", hidden_items="abc")
    config = tomllib.loads(_task_toml(cell, Scoring(reward="score"), Arith(), spec))
    assert config["environment"]["gpus"] == 2 and config["environment"]["network_mode"] == "no-network"
    assert config["verifier"]["environment"]["gpus"] == 1  # one GPU scores, by default
    assert config["metadata"]["reward"] == "score" and config["metadata"]["base_model"] == "org/Model-1B@main"
    assert json.loads(config["metadata"]["benchmark_options"]) == {"chat_template": True}
    assert config["task"]["name"] == "autorl/arith-model-1b-3600s"
    none = tomllib.loads(_task_toml(cell, Scoring(verifier_gpus=0), Arith(), spec))
    assert none["verifier"]["environment"]["gpus"] == 0
