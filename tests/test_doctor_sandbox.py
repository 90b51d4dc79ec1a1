"""`autorl doctor` reports the sandbox `autorl run` would use, honouring what run honours (AUTORL_BWRAP)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autorl.sandbox import bwrap_available

from .conftest import cli


def _checks(env: dict[str, str]) -> dict[str, dict[str, object]]:
    proc = cli("doctor", "--json", env=env)
    return {str(c["name"]): dict(c) for c in json.loads(proc.stdout)}


def _sandbox_check(env: dict[str, str]) -> dict[str, object]:
    return _checks(env)["sandbox (bubblewrap)"]


def test_doctor_names_the_bwrap_that_run_would_use(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "bwrap"
    checks = _checks({"AUTORL_HOME": str(tmp_path / "home"), "AUTORL_BWRAP": str(missing)})
    check = checks["sandbox (bubblewrap)"]
    # run would not find it (even with a bwrap on PATH), and doctor says so
    assert (
        check["ok"] is False and f"{missing} not found" in str(check["detail"]) and "AUTORL_BWRAP" in str(check["fix"])
    )
    # nor would third-party scorer code, which then refuses to run with the operator's rights
    scorer = checks["scorer sandbox (third-party code)"]
    assert scorer["ok"] is False and "AUTORL_SCORER_SANDBOX=none" in str(scorer["detail"])


@pytest.mark.skipif(bwrap_available()[0] is None, reason="bubblewrap cannot run here")
def test_doctor_finds_a_bwrap_off_path_named_by_autorl_bwrap(tmp_path: Path) -> None:
    exe = bwrap_available()[0]
    assert exe is not None
    mine = tmp_path / "tools" / "my-bwrap"
    mine.parent.mkdir()
    shutil.copy2(exe, mine)
    check = _sandbox_check({"AUTORL_HOME": str(tmp_path / "home"), "AUTORL_BWRAP": str(mine)})
    assert check["ok"] is True and str(check["detail"]).startswith(f"autorl run uses {mine} (recorded as bwrap")
