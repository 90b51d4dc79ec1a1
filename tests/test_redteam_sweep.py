"""Red team: a study's run keys and its attempts' outcomes, attacked the way a reward-hacking agent (or a
careless spec) would: results reused for a run that is not the one the key names, and a recorded run turned
into an "infrastructure failure" that the coordinator retries (best of n)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autorl.sweep.coordinator import expand
from autorl.sweep.store import INFRA, RESULT, write_json


def _agent(root: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(json.dumps({"name": "a", "start": "start.sh"}))
    (root / "start.sh").write_text("#!/usr/bin/env bash\necho hi\n")
    return str(root)


def _key(spec: dict[str, Any]) -> str:
    return expand(spec).cells[0].run_key


def test_switching_the_audit_off_changes_the_run_key(home: Path, tmp_path: Path) -> None:
    spec = {"agent": _agent(tmp_path / "a"), "task": "arith", "model": "autorl:tiny", "timeout": 30}
    assert _key({**spec, "audit": False}) != _key(spec)


def test_new_weights_of_the_same_size_change_the_run_key(home: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    weights = model / "model.safetensors"
    weights.write_bytes(b"\0" * (2 << 20))
    spec = {"agent": _agent(tmp_path / "a"), "task": "arith", "model": str(model), "timeout": 30}
    before = _key(spec)
    weights.write_bytes(b"\1" * (2 << 20))
    assert _key(spec) != before


def test_a_changed_small_model_file_changes_the_run_key(home: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "rope_theta": 10000.0}))
    spec = {"agent": _agent(tmp_path / "a"), "task": "arith", "model": str(model), "timeout": 30}
    before = _key(spec)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2", "rope_theta": 99999.0}))
    assert _key(spec) != before


#: a stand-in for `autorl run` that records its run in the ledger of its home (as the real one does first,
#: before the audit), then ends with an error, as `autorl run` does when a step after the record fails (the
#: disk its agent filled, say)
RECORDED_THEN_FAILED = textwrap.dedent("""\
    import json, os, sys
    from pathlib import Path
    from autorl.record.ledger import Ledger
    args = sys.argv[2:]
    row = {"run_id": "r-bad", "timestamp": "2026-01-01 00:00:00", "task": "arith", "agent": "a",
           "base_model": "autorl:tiny", "baseline": 20.0, "best_score": 5.0, "improvement": -15.0,
           "improvement_ci95": [-16.0, -14.0], "p_value": 0.01, "submissions": 1, "duration_s": 1.0,
           "success": False, "workspace": args[args.index("--runs-dir") + 1], "seed": 0, "config_hash": "cfg",
           "end_reason": "agent finished"}
    ledger = Ledger(Path(os.environ["AUTORL_HOME"]) / "autorl.db")
    ledger.ingest({"row": row, "submissions": [], "meta": {}})
    ledger.close()
    sys.stderr.write("OSError: [Errno 28] No space left on device\\n")
    sys.exit(1)
""")


def test_a_recorded_run_that_then_exits_with_an_error_is_a_result_not_a_retry(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorl.sweep.worker import run_attempt

    script = tmp_path / "recorded_then_failed.py"
    script.write_text(RECORDED_THEN_FAILED)
    attempt = tmp_path / "sweep" / "keys" / "k" / "a1"
    attempt.mkdir(parents=True)
    spec = {"agent": _agent(tmp_path / "a"), "task": "arith", "model": "autorl:tiny", "timeout": 30}
    cell = expand(spec).cells[0]
    write_json(
        attempt / "payload.json",
        {
            "run_key": "k",
            "attempt": 1,
            "sweep": "s",
            "sweep_id": "x",
            "sweep_dir": str(tmp_path / "sweep"),
            "args": cell.run_args(),
            "options": cell.options,
            "home": str(home),
            "gpus": None,
            "scratch": str(tmp_path / "scratch"),
            "program": [sys.executable, str(script)],
        },
    )
    outcome = run_attempt(attempt)
    assert outcome["kind"] != INFRA, outcome["reason"]
    assert outcome["kind"] == RESULT and outcome["success"] is False


def test_the_run_cannot_see_the_study_folder_or_the_shared_home(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the worker hands the run: both folders named for the sandbox to mask, nothing of the engine."""
    from autorl.sweep.worker import run_attempt

    script = tmp_path / "env_dump.py"
    script.write_text("import json, os, sys\njson.dump(dict(os.environ), open(os.environ['DUMP'], 'w'))\nsys.exit(3)\n")
    dump = tmp_path / "env.json"
    monkeypatch.setenv("DUMP", str(dump))
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    attempt = tmp_path / "sweep" / "keys" / "k" / "a1"
    attempt.mkdir(parents=True)
    spec = {"agent": _agent(tmp_path / "a"), "task": "arith", "model": "autorl:tiny", "timeout": 30}
    cell = expand(spec).cells[0]
    write_json(
        attempt / "payload.json",
        {
            "run_key": "k",
            "attempt": 1,
            "sweep": "s",
            "sweep_id": "x",
            "sweep_dir": str(tmp_path / "sweep"),
            "args": cell.run_args(),
            "options": cell.options,
            "home": str(home),
            "gpus": None,
            "scratch": str(tmp_path / "scratch"),
            "program": [sys.executable, str(script)],
        },
    )
    outcome = run_attempt(attempt)
    assert outcome["kind"] == INFRA  # exit code 3, nothing recorded: an infrastructure failure
    env = json.loads(dump.read_text())
    hidden = env["AUTORL_SANDBOX_HIDE"].split(os.pathsep)
    assert str(home.resolve()) in hidden and str((tmp_path / "sweep").resolve()) in hidden
    assert "RAY_ADDRESS" not in env
    assert Path(env["AUTORL_HOME"]).resolve() != home.resolve()
