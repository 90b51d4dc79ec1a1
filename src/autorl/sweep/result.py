"""A study's report as Python hands it to a notebook: the report dict itself, a short repr, a table, flat records."""

from __future__ import annotations

from html import escape
from typing import Any

from autorl.record.display import fmt_ci, fmt_signed, is_number
from autorl.sweep.report_records import ReportCell, StudyRecord

__all__ = ["StudyResult"]

#: the cells a repr lists before it says how many more there are
SHOWN_CELLS = 12


def _cell_line(c: ReportCell) -> tuple[str, str, str, str]:
    budget = c.get("timeout_s")
    who = f"{c.get('agent')} on {c.get('task')} ({c.get('base_model')}" + (
        f", {budget:g} s)" if is_number(budget) else ")"
    )
    return (who, fmt_signed(c.get("mean")), fmt_ci(c.get("ci95")), f"{c.get('runs')} runs, {c.get('failures')} failed")


class StudyResult(dict[str, Any]):
    """A study's report (:func:`autorl.sweep.report.build_report`'s dict, unchanged) that reads in a notebook.

    Each cell is a mean held-out test improvement over its runs (failed runs counted as 0) with a 95%
    t-interval; :meth:`to_records` gives one flat record per run (or missing key) for ``pandas.DataFrame``.
    """

    @property
    def cells(self) -> list[ReportCell]:
        return list(self.get("cells") or [])

    def to_records(self) -> list[StudyRecord]:
        """One flat dict per run of every cell, then one per key without a result (``status`` says why)."""
        out: list[StudyRecord] = []
        for c in self.cells:
            for r in c.get("per_run") or []:
                ci = r.get("improvement_ci95")
                pair = ci if isinstance(ci, list | tuple) and len(ci) == 2 else (None, None)
                out.append(
                    {
                        "sweep": self.get("sweep"),
                        "task": c.get("task"),
                        "agent": c.get("agent"),
                        "base_model": c.get("base_model"),
                        "config_hash": c.get("config_hash"),
                        "timeout_s": c.get("timeout_s"),
                        "limit": c.get("limit"),
                        "seed": r.get("seed"),
                        "run_id": r.get("run_id"),
                        "run_key": r.get("run_key"),
                        "status": "done",
                        "success": r.get("success"),
                        "beat_baseline": r.get("beat_baseline"),
                        "improvement": r.get("improvement"),
                        "improvement_ci95_low": pair[0],
                        "improvement_ci95_high": pair[1],
                        "end_reason": r.get("end_reason"),
                    }
                )
        for m in self.get("missing") or []:
            out.append(
                {
                    "sweep": self.get("sweep"),
                    "task": m.get("task"),
                    "agent": m.get("agent"),
                    "base_model": m.get("model"),
                    "config_hash": None,
                    "timeout_s": None,
                    "limit": None,
                    "seed": m.get("seed"),
                    "run_id": None,
                    "run_key": m.get("run_key"),
                    "status": m.get("status"),
                    "success": None,
                    "beat_baseline": None,
                    "improvement": None,
                    "improvement_ci95_low": None,
                    "improvement_ci95_high": None,
                    "end_reason": "; ".join(str(x) for x in m.get("reasons") or []),
                }
            )
        return out

    def __repr__(self) -> str:
        cells = self.cells
        lines = [
            f"<StudyResult {self.get('sweep')}: {len(cells)} cells, "
            f"{sum(int(c.get('runs') or 0) for c in cells)} runs, {len(self.get('missing') or [])} without "
            "a result; mean test improvement [95% CI] per cell:"
        ]
        lines += ["  " + "  ".join(_cell_line(c)) for c in cells[:SHOWN_CELLS]]
        if len(cells) > SHOWN_CELLS:
            lines.append(f"  ... {len(cells) - SHOWN_CELLS} more (to_records() has every run)")
        return "\n".join(lines) + ">"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("cell", "mean test improvement", "95% CI", "runs"))
        rows = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in _cell_line(c)) + "</tr>" for c in self.cells)
        return (
            f"<div><b>study {escape(str(self.get('sweep')))}</b> ({len(self.get('missing') or [])} keys "
            f"without a result)<table><tr>{head}</tr>{rows}</table></div>"
        )
