"""`--json`: whatever a library or a subprocess writes to standard output while a command runs goes to stderr;
stdout holds exactly one JSON document, for every command that takes `--json`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import cli, echo_answers, write_stub_checkpoint

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


@pytest.mark.parametrize("command", [("list", "benchmarks"), ("list", "agents"), ("list", "backends"), ("doctor",),
                                     ("results",), ("recover", "--all"), ("eval",)])
def test_json_output_is_one_document_whatever_else_writes_to_stdout(tmp_path: Path, noisy_env: dict[str, str],
                                                                     command: tuple[str, ...]) -> None:
    args = list(command)
    if command == ("eval",):
        ckpt = write_stub_checkpoint(tmp_path / "ckpt", echo_answers(5))
        args += ["--task", "echo", "--model", str(ckpt), "--backend", "scripted", "--limit", "4"]
    proc = cli(*args, "--json", env=noisy_env)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)  # one document, nothing before or after it
    assert "NOISE print" in proc.stderr and "NOISE fd" in proc.stderr  # the noise was there, on stderr
