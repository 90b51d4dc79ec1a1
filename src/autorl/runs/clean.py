"""``autorl clean``: the checkpoints of recorded runs deleted by a keep policy, to give a disk back.

A run recorded with ``--keep all`` (or before keep policies existed) leaves every submission twice: the
grader's snapshot and the agent's folder. Cleaning applies a policy afterwards (:func:`autorl.grader.keep.
keep_after_run`): the record stays whole (scores, items, logs), only the weights go. Runs still in flight are
never touched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from autorl.errors import UsageError
from autorl.grader.keep import POLICIES, keep_after_run
from autorl.grader.schema import KeepReport
from autorl.record.schema import RowRecord

__all__ = ["Cleaned", "clean_runs"]


class Cleaned(KeepReport, total=False):
    """One run's part of ``autorl clean``'s report: what its keep policy deleted (or would), or why nothing."""

    run_id: str
    #: why nothing was done (no grader store recorded)
    note: str


def clean_runs(
    home: Path,
    run_ids: Sequence[str] = (),
    *,
    older_than_days: float | None = None,
    policy: str = "selected",
    dry_run: bool = False,
) -> list[Cleaned]:
    """Apply ``policy`` to the recorded runs of ``home`` (``run_ids``: those alone; ``older_than_days``: only runs
    recorded that long ago); per run, what was (with ``dry_run``: would be) deleted."""
    from autorl.record.ledger import Ledger

    if policy not in POLICIES or policy == "all":
        raise UsageError(f"--keep must be best or selected, not {policy!r}")
    if older_than_days is not None and older_than_days < 0:
        raise UsageError("--older-than must be a non-negative number of days")
    db = home / "autorl.db"
    if not db.is_file():
        return []
    ledger = Ledger(db)
    try:
        recorded = ledger.runs()
        live = {str(r.get("run_id")) for r in ledger.live()}
    finally:
        ledger.close()
    by_id = {str(r["row"]["run_id"]): r for r in recorded if isinstance(r.get("row"), dict)}
    unknown = [r for r in run_ids if r not in by_id]
    if unknown:
        raise UsageError(f"no recorded run {', '.join(unknown)} in {db}")
    chosen = [by_id[r] for r in run_ids] if run_ids else list(by_id.values())
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    out: list[Cleaned] = []
    for result in chosen:
        row, meta = result["row"], result.get("meta") or {}
        run_id = str(row["run_id"])
        finished = float(meta.get("finished") or 0) or _recorded_at(row)
        if run_id in live or (cutoff is not None and finished > cutoff):
            continue
        store = Path(str(meta.get("store_dir") or ""))
        output = Path(str(row.get("workspace") or "")) / "output"
        if not str(meta.get("store_dir") or ""):
            out.append(Cleaned(run_id=run_id, policy=policy, pruned=[], freed_bytes=0, note="no grader store recorded"))
            continue
        done = keep_after_run(store, output, policy, dry_run=dry_run)
        out.append(
            Cleaned(run_id=run_id, policy=done["policy"], pruned=done["pruned"], freed_bytes=done["freed_bytes"])
        )
    return out


def _recorded_at(row: RowRecord) -> float:
    import datetime as dt

    try:
        started = dt.datetime.strptime(str(row.get("timestamp")), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return time.time()
    return started.timestamp() + float(row.get("duration_s") or 0)
