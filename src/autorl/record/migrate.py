"""Rows recorded by an older version, read in today's meaning: the one place an old row is converted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from autorl.decoys import split_recorded
from autorl.record.display import beat_baseline
from autorl.record.row import scored_submissions
from autorl.record.schema import RowRecord

__all__ = ["upgrade_row"]


def upgrade_row(
    row: Mapping[str, Any],
    submissions: Sequence[Mapping[str, Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> RowRecord:
    """A row recorded by an older version, in today's meaning (other rows unchanged): a :class:`RowRecord`, but
    for columns added after it was written (readers ``.get`` those).

    Rows recorded before the headline was the test split held the dev figures under ``baseline``/
    ``best_score``/``improvement``/``improvement_ci95``/``p_value``; they move to the ``dev_*`` columns and the
    headline is the test figures, or none. Rows recorded before the ``limit`` column take it from the record's
    ``meta`` (where the run kept it from the start). Rows recorded before reads of decoys had a column of their
    own held them in ``decoys``; they move to ``decoys_read`` (:func:`autorl.decoys.split_recorded`).
    """
    kept = meta.get("limit") if isinstance(meta, Mapping) else None
    if "limit" not in row and isinstance(kept, int) and not isinstance(kept, bool):
        row = {**row, "limit": kept}
    if "dev_k" in row:
        return cast(RowRecord, _with_beat(_with_reads(dict(row))))
    out = _with_reads(dict(row))
    out["dev_baseline"] = row.get("baseline")
    out["dev_best"] = row.get("best_score")
    out["dev_improvement"] = row.get("improvement")
    out["dev_improvement_ci95"] = row.get("improvement_ci95")
    out["dev_k"] = len(scored_submissions(submissions or []))
    tested = row.get("test_score") is not None
    out["baseline"] = row.get("test_baseline")
    out["best_score"] = row.get("test_score")
    out["improvement"] = row.get("test_improvement")
    out["improvement_ci95"] = row.get("test_improvement_ci95")
    out["p_value"] = None  # the old p-value was the dev one; the test one was not kept in the row
    out["success"] = bool(row.get("success")) and tested
    out.setdefault("sandbox", None)
    out.setdefault("llm_usage_source", "agent-reported" if row.get("llm_tokens") is not None else None)
    return cast(RowRecord, _with_beat(out))


def _with_reads(row: dict[str, Any]) -> dict[str, Any]:
    # a row recorded before reads had a column of their own: its ``decoys`` held reads beside the bait
    if "decoys_read" in row or not isinstance(row.get("decoys"), list):
        return row
    bait, read = split_recorded(row["decoys"])
    return {**row, "decoys": bait, "decoys_read": read}


def _with_beat(row: dict[str, Any]) -> dict[str, Any]:
    # a row recorded before the column: derived from its headline interval
    return row if "beat_baseline" in row else {**row, "beat_baseline": beat_baseline(row.get("improvement_ci95"))}
