"""One isolation policy per kind of untrusted process, in the user's shape: an operator's home with tools installed
under it (pipx, ``pip --user``, rustup, ``npm -g``, a linked ``~/bin``) and keys beside them. Under real bwrap the
agent runs every tool and reads no key; the policy shows each PATH entry alone (never a parent) and each program's
package folder; what a benchmark offers its agent is checked before the run; scorer code and model-written
programs see neither the home nor the harness; the trust table in docs/sandbox.md is the policy's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autorl.sandbox import bwrap_available, launch, trust_table
from autorl.sandbox.agent import AGENT, agent_policy
from autorl.sandbox.policy import MASKED, READ_ONLY, READ_WRITE, SHOWN_LAST
from autorl.sandbox.program import PROGRAM, program_policy
from autorl.sandbox.programs import path_view
from autorl.sandbox.scorer import SCORER, scorer_policy

from .conftest import ROOT, cli, echo_answers, write_stub_checkpoint
from .operator_home import KEYS, TOOLS, OperatorHome, make_operator_home

BWRAP, WHY = bwrap_available()
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason=f"bubblewrap cannot run here: {WHY}")

#: an honest agent that looks around the way agents do: runs the tools, lists the home, greps it, tars it
LOOKS_AROUND = r"""#!/usr/bin/env bash
out="$WORKSPACE/code/looked.txt"
mkdir -p "$WORKSPACE/code"
for tool in pipxtool usertool cargotool nodetool dottool home-script.sh; do
  echo "tool $tool: $("$tool" 2>&1 | head -c 200)" >> "$out"
done
while read -r rel; do cat "$HOME/$rel" >> "$out" 2>&1; done < "$AUTORL_AGENT_DIR/keys.txt"
ls -A "$HOME" "$HOME/.local" "$HOME/.local/share" "$HOME/.local/lib" "$HOME/.cargo" "$HOME/.config" >> "$out" 2>&1
grep -rl -- "-KEY-" "$HOME" /tmp /run 2>/dev/null >> "$out"
tar cf - "$HOME" 2>/dev/null | grep -a -o -- "[A-Z]*-KEY-[0-9a-f]*" >> "$out"
git -C "$HOME" status >> "$out" 2>&1
env >> "$out"
exit 0
"""


@pytest.fixture
def operator_home(tmp_path: Path) -> OperatorHome:
    return make_operator_home(tmp_path / "home")


def _masked_for(home: OperatorHome) -> list[Path]:
    return [home.root, Path("/tmp")]


def test_path_view_shows_each_entry_alone_and_each_programs_package_folder(operator_home: OperatorHome) -> None:
    home = operator_home.root
    view = path_view(operator_home.path, _masked_for(operator_home), operator_home.env())
    shown = set(view.shown)
    local = home / ".local"
    expected = {
        local / "bin",
        home / ".cargo" / "bin",
        home / "bin",
        home / "dotfiles" / "bin",
        home / "home-script.sh",  # ~ itself on PATH: its programs alone
        local / "lib" / "node_modules" / "nodetool",  # npm -g: the package, nothing beside it
        local / "share" / "pipx" / "venvs" / "pipxtool",  # pipx: the venv
        *local.glob("lib/python3*/site-packages"),
    }  # pip --user: the user's site-packages
    assert shown == expected, sorted(map(str, shown ^ expected))
    # never a parent of an entry, never the home, never where keys are kept
    for never in (home, local, local / "share", local / "lib", home / ".cargo", home / ".config", home / "dotfiles"):
        assert never not in shown
    assert view.hidden == [local / "bin" / ".tool-token"]  # a dot-file beside the programs is no program
    # relative and empty entries bring nothing (they name the process's own working folder)
    assert path_view("bin::.", _masked_for(operator_home), operator_home.env()).shown == []


def test_the_agents_policy_masks_every_home_and_shows_nothing_that_holds_a_mask(
    operator_home: OperatorHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.builtin.arith import Arith

    host_tmp = ROOT / ".pytest-host-tmpdir"
    monkeypatch.setenv("TMPDIR", str(host_tmp))
    # pytest puts the checkout's root on sys.path, and a test before this one may have put a folder ahead of it;
    # an orchestrator run by a user has neither: the root is left out of the Python environment measured here
    monkeypatch.setattr(sys, "path", [sys.path[0], *(p for p in sys.path[1:] if p != str(ROOT))])
    autorl_home = operator_home.root / ".cache" / "autorl"
    ws = autorl_home / "runs" / "arith" / "r_agent"
    ws.mkdir(parents=True)
    env = {**operator_home.env(), "TMPDIR": str(host_tmp)}
    policy = agent_policy(
        workspace=ws,
        env=env,
        model=ws,
        train_dir=ws,
        agent_files=[],
        benchmark=Arith(),
        autorl_home=autorl_home,
        runs_root=autorl_home / "runs",
        store_dir=autorl_home / "grader",
        hidden_dir=autorl_home / "hidden" / "arith",
        network="off",
        environ=env,
    )
    masked = policy.paths(MASKED)
    assert {operator_home.root, autorl_home, Path("/tmp"), host_tmp} <= set(masked)
    assert {b.rule for b in policy.files} <= {r.key for r in AGENT.rules}
    for shown in policy.paths(READ_ONLY, SHOWN_LAST):
        assert not any(m == shown or shown in m.parents for m in masked), shown  # no parent shown to reach a child
    # the caller's script folder (sys.path[0], maybe its home) is never part of the Python environment shown
    monkeypatch.setattr(sys, "path", [str(operator_home.root), *sys.path[1:]])
    again = agent_policy(
        workspace=ws,
        env=env,
        model=ws,
        train_dir=ws,
        agent_files=[],
        benchmark=Arith(),
        autorl_home=autorl_home,
        runs_root=autorl_home / "runs",
        store_dir=autorl_home / "grader",
        hidden_dir=autorl_home / "hidden" / "arith",
        network="off",
        environ=env,
    )
    assert operator_home.root not in again.paths(READ_ONLY)


@needs_bwrap
def test_the_agent_runs_every_tool_and_reads_no_key(operator_home: OperatorHome, tmp_path: Path) -> None:
    agent = tmp_path / "agents" / "looks-around"
    agent.mkdir(parents=True)
    (agent / "config.yaml").write_text("name: looks around\nstart: start.sh\n")
    (agent / "start.sh").write_text(LOOKS_AROUND)
    (agent / "keys.txt").write_text("".join(f"{rel}\n" for rel in KEYS))
    base = write_stub_checkpoint(tmp_path / "stub-base", echo_answers(5))
    # autorl's home where it is by default: in the operator's home
    env = {**operator_home.env(), "AUTORL_SANDBOX_RO": "", "AUTORL_HOME": str(operator_home.root / ".cache" / "autorl")}
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--sandbox",
        "bwrap",
        "--network",
        "off",
        "--json",
        "--no-audit",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    ws = Path(json.loads(proc.stdout)["workspace"])
    assert ws.is_relative_to(operator_home.root / ".cache" / "autorl")
    looked = (ws / "code" / "looked.txt").read_text()
    for tool, said in TOOLS.items():
        assert f"tool {tool}: {said}" in looked, looked  # each tool, however installed, runs
    assert "tool home-script.sh: home script" in looked
    leaked = [marker for marker in operator_home.key_markers() if marker in looked]
    assert not leaked, looked
    # the home holds only the ways to what is shown (and autorl's home, as a mount point of its mask)
    listing = looked.split(f"{operator_home.root}:\n", 1)[1].split("\n\n", 1)[0].split()
    assert sorted(listing) == [".cache", ".cargo", ".local", "bin", "dotfiles", "home-script.sh"], looked


def _offering(tmp_path: Path, body: str) -> Path:
    """A test plugin (a folder for PYTHONPATH) registering ``offers``: arith whose agent view is ``body``."""
    root = tmp_path / "offering-plugin"
    root.mkdir()
    (root / "autorl_offering.py").write_text(
        "import os\nfrom pathlib import Path\nfrom autorl import hookimpl\n"
        "from autorl.builtin.arith import Arith\n\n\nclass Offers(Arith):\n    name = 'offers'\n\n"
        + body
        + "\n\n@hookimpl\ndef register_benchmarks(register):\n    register(Offers)\n"
    )
    info = root / "autorl_offering-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: autorl-offering\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[autorl]\noffers = autorl_offering\n")
    return root


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            "    def agent_env(self):\n        from autorl import read_hidden_items\n"
            "        return {'HINTS': ' '.join(str(i.input) for i in read_hidden_items('offers', self.hidden_dir, 'dev'))}",
            "plugin autorl-offering: benchmark offers: agent_env() variable HINTS holds",
        ),
        (
            "    def agent_env(self):\n        return {'CONFIG': 'key=' + os.environ['MY_SERVICE_TOKEN']}",
            "plugin autorl-offering: benchmark offers: agent_env() variable CONFIG holds a key of the harness's: refused",
        ),
        (
            "    def agent_paths(self):\n        return [Path.home() / '.netrc']",
            "plugin autorl-offering: benchmark offers shows its agent",
        ),
        (
            "    def agent_paths(self):\n        return [Path.home()]",
            "plugin autorl-offering: benchmark offers: agent_paths() names",
        ),
    ],
)
def test_what_a_plugin_offers_its_agent_is_checked_before_the_run(tmp_path: Path, body: str, why: str) -> None:
    plugin = _offering(tmp_path, body)
    user_home = tmp_path / "user"
    user_home.mkdir()
    (user_home / ".netrc").write_text("machine x password p4ssw0rd-netrc\n")
    env = {
        "PYTHONPATH": str(plugin),
        "AUTORL_HOME": str(tmp_path / "autorl"),
        "HOME": str(user_home),
        "MY_SERVICE_TOKEN": "tok-0123456789abcdef",
    }
    proc = cli(
        "run",
        "--agent",
        "example",
        "--task",
        "offers",
        "--model",
        str(write_stub_checkpoint(tmp_path / "stub")),
        "--backend",
        "scripted",
        "--timeout",
        "30",
        "--sandbox",
        "none",
        env=env,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert why in line, proc.stderr
    assert "tok-0123456789abcdef" not in proc.stderr and "p4ssw0rd" not in proc.stderr
    assert not (tmp_path / "autorl" / "runs").exists()  # refused before anything started


HOSTILE_EVAL = """
import glob, os
def evaluate(question, model_answer, reference_answer, **kwargs):
    got = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            got.append(open(path, "rb").read().decode(errors="replace"))
        except OSError:
            pass
    for path in [os.path.expanduser("~/.netrc"), os.environ.get("THE_NETRC", "")]:
        try:
            got.append(open(path).read())
        except OSError:
            pass
    folders = [e.split("THE_FOLDER=", 1)[1].split("\\0", 1)[0] for e in got if "THE_FOLDER=" in e]
    for folder in folders[:1]:  # its own folder, as the harness's environment names it
        try:
            with open(folder + "/description.md", "a") as f:
                f.write("appended by eval.py\\n")
            got.append("wrote")
        except OSError:
            pass
    return 1.0 if any("CANARY-0af3" in g or g == "wrote" for g in got) else 0.0
"""


SCORE_IN_A_GRADER = """
import json, sys
from pathlib import Path
from autorl.sandbox.scorer import FolderChanged
from autorl_smith.scorer import Request, score_all
try:
    print(json.dumps([s.score for s in score_all(Path(sys.argv[1]), [Request("q", "a", "a")], timeout_s=20.0)]))
except FolderChanged as exc:
    print(json.dumps(str(exc)))
"""


@needs_bwrap
@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_scorer_code_runs_without_the_operators_rights(tmp_path: Path, sandbox: str) -> None:
    folder = tmp_path / "bench" / "hostile"
    (folder / "data").mkdir(parents=True)
    (folder / "eval.py").write_text(HOSTILE_EVAL)
    (folder / "description.md").write_text("# hostile\n")
    netrc = tmp_path / "user" / ".netrc"
    netrc.parent.mkdir()
    netrc.write_text("machine x password CANARY-0af3\n")
    # a process scoring as the grader does, its environment holding what eval.py hunts for in /proc/<pid>/environ
    env = {
        **os.environ,
        "HOME": str(netrc.parent),
        "SOME_TOKEN": "CANARY-0af3",
        "THE_NETRC": str(netrc),
        "THE_FOLDER": str(folder),
        "AUTORL_SCORER_SANDBOX": sandbox,
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCORE_IN_A_GRADER, str(folder)], env=env, capture_output=True, text=True, timeout=120
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if sandbox == "bwrap":  # no environment of the harness, no home, its folder out of reach
        assert got == [0.0], proc.stderr
        assert (folder / "description.md").read_text() == "# hostile\n"
    else:  # the control: with the operator's rights it gets all of it, and the changed folder is refused
        assert "changed while its code ran" in got, proc.stderr


@needs_bwrap
def test_scorer_and_program_policies_show_only_the_system_and_their_own_folder(tmp_path: Path) -> None:
    from autorl.sandbox.host import SYSTEM_DIRS

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for policy in (scorer_policy(scratch), program_policy(scratch)):
        shown = policy.paths(READ_ONLY, READ_WRITE)
        folders = sorted(
            {
                str(d)
                for p in shown
                for d in p.parents
                if d not in SYSTEM_DIRS and not any(d == q or q in d.parents for q in shown)
            }
            | {"/"}
        )
        script = (
            f"for d in {' '.join(folders)}; do echo \"$d: $(ls -A $d | tr '\\n' ' ')\"; done; "
            "cat /proc/[0-9]*/cmdline | tr '\\0' ' ' | grep -c 'bin/[p]ytest'; cat /etc/shadow | head -c 20; "
            "echo x > written.txt && echo wrote; env"
        )
        run = launch(policy, ["sh", "-c", script], mode="bwrap", executable=BWRAP)
        proc = subprocess.run(run.argv, env=run.env, cwd=run.cwd, capture_output=True, text=True, timeout=60)
        lines = proc.stdout.splitlines()
        # each folder on the way to what is shown holds only the way there (and / the system's folders)
        allowed = {p.relative_to(d).parts[0] for p in shown for d in map(Path, folders) if d in p.parents}
        allowed |= {d.name for d in SYSTEM_DIRS} | {"dev", "proc", "tmp", "var", "run"}
        for line in lines[: len(folders)]:
            folder, _, names = line.partition(": ")
            assert set(names.split()) <= allowed, (policy.kind, folder, set(names.split()) - allowed)
        assert lines[len(folders)] == "0", proc.stdout + proc.stderr  # no process of the harness's
        assert "wrote" in lines and (scratch / "written.txt").exists()
        names = {line.split("=", 1)[0] for line in lines if "=" in line}
        assert names <= {
            "PATH",
            "HOME",
            "LANG",
            "TMPDIR",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONUNBUFFERED",
            "OMP_NUM_THREADS",
            "PYTHONPATH",
            "PWD",
            "SHLVL",
            "_",
        }, names
        assert not [line for line in lines if line.startswith("root:")]  # the system's secrets, as root
        (scratch / "written.txt").unlink()


def test_the_trust_table_in_the_docs_is_the_policys() -> None:
    doc = (ROOT / "docs" / "sandbox.md").read_text()
    assert trust_table([AGENT, SCORER, PROGRAM]) in doc, "docs/sandbox.md: paste autorl.sandbox.trust_table() in"


def test_every_rule_of_the_scorer_and_program_kinds_is_applied(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for kind, policy in ((SCORER, scorer_policy(tmp_path, data=data)), (PROGRAM, program_policy(tmp_path))):
        used = {b.rule for b in policy.files}
        assert used <= {r.key for r in kind.rules}
        assert {r.key for r in kind.rules if r.access in (READ_ONLY, READ_WRITE)} <= used, kind.name
    assert os.environ.get("HOME") is None or Path(os.environ["HOME"]) in scorer_policy(tmp_path).paths(MASKED)


def test_plugin_authors_make_the_same_check_in_their_tests(tmp_path: Path, home: Path) -> None:
    from autorl.builtin.arith import Arith
    from autorl.testing import check_agent_view

    class Hints(Arith):
        def agent_env(self) -> dict[str, str]:
            items = self.load_items("test", self.hidden_dir) if self.hidden_dir else []
            return {"HINTS": " ".join(str(i.input) for i in items[:3])}

    check_agent_view(Arith(), tmp_path / "arith")
    with pytest.raises(AssertionError, match=r"^this plugin: benchmark arith: agent_env\(\) variable HINTS holds 3 "):
        check_agent_view(Hints(), tmp_path / "hints")
