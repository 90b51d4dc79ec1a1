"""What an attempt's run left: its result read from the node's scratch ledger (never from a file the agent can
write), a run that died before its record recovered from its grader's store, and the grader's and watch's stores
copied into the attempt's folder. A run found recorded here is a result, whatever its exit; the worker
(``autorl.sweep.worker``) decides the attempt's outcome from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from autorl.record.schema import ResultRecord
from autorl.sweep.records import Payload


def recover_lost(payload: Payload, home: Path, runs_dir: Path, env: dict[str, str], log: Path) -> None:
    """Record, from its grader's store, a run of this attempt that ended without its record (its agent filled
    the disk, say): ``autorl recover`` with the room the reserve gave back. A run whose scored submissions are
    in its store is then a result, never an infrastructure failure retried for another chance."""
    from autorl.record.ledger import Ledger

    if payload.get("program") or not (home / "autorl.db").is_file():
        return
    ledger = Ledger(home / "autorl.db")
    try:
        lost = [
            str(r["run_id"]) for r in ledger.live() if Path(str(r.get("workspace") or "/")).is_relative_to(runs_dir)
        ]
    finally:
        ledger.close()
    for run_id in lost:
        with log.open("ab") as err:
            subprocess.run(
                [sys.executable, "-c", "from autorl.cli import main; main()", "recover", run_id],
                stdout=err,
                stderr=err,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )


def log_tail(path: Path, lines: int = 1) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[:300]


def copy_stores(result: ResultRecord, attempt_dir: Path) -> None:
    """The grader's store and the watch's record, copied into the attempt's folder; a copy that fails (the study's
    disk full) leaves the node's path in the record and says why: the result is recorded all the same."""
    meta = result.setdefault("meta", {})
    for key, name in (("store_dir", "grader"), ("watch_dir", "watch")):
        src = meta.get(key)
        if src and Path(src).is_dir():
            dst = attempt_dir / name
            shutil.rmtree(dst, ignore_errors=True)
            try:
                shutil.copytree(src, dst, symlinks=True)
            except (OSError, shutil.Error) as exc:
                shutil.rmtree(dst, ignore_errors=True)
                meta[f"{key}_not_copied"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            meta[f"node_{key}"], meta[key] = src, str(dst)
            shutil.rmtree(src, ignore_errors=True)  # the copy is the record's: the scratch disk gets its space back


def result_from_ledger(home: Path, stdout: str) -> ResultRecord:
    import json

    from autorl.record.ledger import Ledger

    row = json.loads(stdout)
    ledger = Ledger(home / "autorl.db")
    try:
        result = ledger.run(str(row["run_id"]))
    finally:
        ledger.close()
    return result if result is not None else {"row": row, "submissions": [], "meta": {"recorded_from": "stdout"}}


def recorded_run(home: Path, runs_dir: Path) -> ResultRecord | None:
    """The run this attempt's ``autorl run`` recorded in its ledger, if it got that far (whatever its exit):
    a recorded run is a result, never an infrastructure failure to retry (that would be best-of-n)."""
    from autorl.record.ledger import Ledger

    if not (home / "autorl.db").is_file():
        return None
    ledger = Ledger(home / "autorl.db")
    try:
        found = [
            r for r in ledger.runs() if Path(str((r.get("row") or {}).get("workspace") or "/")).is_relative_to(runs_dir)
        ]
    finally:
        ledger.close()
    return found[-1] if found else None
