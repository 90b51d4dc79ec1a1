"""`--json`: whatever a library or a subprocess writes to standard output while a command runs goes to stderr;
stdout holds exactly one JSON document, for every command that takes `--json`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import cli, echo_answers, write_stub_checkpoint
from .test_run import agent_folder

#: a library that talks on stdout while the command runs (as vllm's logger does): print() and fd 1 both
NOISY = """
import os, sys
_left = [4]
def _hook(event, args):
    if not _left[0] or event not in ("open", "import", "sqlite3.connect", "subprocess.Popen"):
        return
    try:
        f = sys._getframe(1)
    except ValueError:
        return
    while f is not None:  # only once the command runs, inside click's invoke
        if f.f_code.co_name == "invoke" and f.f_code.co_filename.endswith(os.path.join("click", "core.py")):
            _left[0] -= 1
            print(f"NOISE print {event}")
            sys.stdout.flush()
            os.write(1, b"NOISE fd\\n")
            return
        f = f.f_back
sys.addaudithook(_hook)
"""


@pytest.fixture
def noisy_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NOISY)
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {"AUTORL_HOME": str(tmp_path / "home"), "PYTHONPATH": path}


def _one_document(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # one document, nothing before or after it
    assert "NOISE print" in proc.stderr and "NOISE fd" in proc.stderr  # the noise was there, on stderr
    return doc


@pytest.mark.parametrize(
    "command",
    [
        ("list", "benchmarks"),
        ("list", "agents"),
        ("list", "backends"),
        ("doctor",),
        ("results",),
        ("recover", "--all"),
        ("eval",),
        ("noise",),
        ("sweep", "run"),
        ("export", "harbor"),
    ],
)
def test_json_output_is_one_document_whatever_else_writes_to_stdout(
    tmp_path: Path, noisy_env: dict[str, str], command: tuple[str, ...]
) -> None:
    args = list(command)
    ckpt = write_stub_checkpoint(tmp_path / "ckpt", echo_answers(5))
    scripted = ["--task", "echo", "--model", str(ckpt), "--backend", "scripted", "--limit", "4"]
    if command == ("eval",):
        args += scripted
    elif command == ("noise",):
        args += [*scripted, "--repeats", "2"]
    elif command == ("sweep", "run"):
        spec = tmp_path / "sweep.toml"
        spec.write_text(
            f'name = "plan"\nagent = "example"\ntask = "echo"\nmodel = "{ckpt}"\nseed = [0, 1]\n'
            'timeout = 60\nbackend = "scripted"\n'
        )
        args += [str(spec), "--dry-run"]
    elif command == ("export", "harbor"):
        args += ["--task", "echo", "--model", str(ckpt), "--timeout", "60", "--out", str(tmp_path / "out")]
    _one_document(cli(*args, "--json", env=noisy_env))


@pytest.mark.e2e
def test_a_run_its_audit_its_study_status_and_report_print_one_document_each(
    tmp_path: Path, noisy_env: dict[str, str]
) -> None:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    agent = agent_folder(
        tmp_path / "agents",
        "one",
        """
        make_ckpt v1 15
        submit v1
    """,
    )
    row = _one_document(
        cli(
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
            "none",
            "--json",
            env=noisy_env,
        )
    )
    assert row["submissions"] == 1 and row["end_reason"] == "agent finished"
    flags = _one_document(cli("audit", row["run_id"], "--json", env=noisy_env))
    assert isinstance(flags, list)
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'name = "one"\nagent = "{agent}"\ntask = "echo"\nmodel = "{base}"\nseed = 0\ntimeout = 60\n'
        'backend = "scripted"\nsandbox = "none"\n'
    )
    cli("sweep", "run", str(spec), "--slots", "1", env={"AUTORL_HOME": noisy_env["AUTORL_HOME"]}, check=True)
    status = _one_document(cli("sweep", "status", str(spec), "--json", env=noisy_env))
    assert [r["state"] for r in status] == ["done"]
    report = _one_document(cli("sweep", "report", str(spec), "--format", "json", env=noisy_env))
    assert report["cells"][0]["runs"] == 1
    rows = _one_document(cli("results", "--format", "json", env=noisy_env))
    assert {r["run_id"] for r in rows} >= {row["run_id"]}
