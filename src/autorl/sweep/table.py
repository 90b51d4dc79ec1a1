"""The table of a study's cells that ``sweep run`` keeps live and ``sweep status`` prints: queued, running with
its time left, done with its score, failed with its reason, and the attempts each key took."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from autorl.record.display import short_path
from autorl.sweep.report_records import CellState
from autorl.sweep.store import DONE, FAILED, GAVE_UP, QUEUED, RUNNING, KeyState, read_json

if TYPE_CHECKING:
    from autorl.sweep.coordinator import Study

COLUMNS = ("run_key", "agent", "task", "model", "seed", "state", "attempts", "detail")


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def cell_rows(study: Study, now: float | None = None) -> list[CellState]:
    """One row per cell of ``study`` (a :class:`autorl.sweep.coordinator.Study` with fresh states)."""
    now = time.time() if now is None else now
    out: list[CellState] = []
    for cell in study.cells:
        state: KeyState = study.states.get(cell.run_key) or KeyState(cell.run_key)
        status = state.status(study.retries)
        detail = ""
        if status == RUNNING and state.running is not None:
            node = read_json(state.running.path / "node.json")
            job = state.running.job or {}
            if isinstance(node, dict):
                # the agent's budget plus the run's own steps; the left time is the agent's budget's
                left = float(cell["timeout"]) - (now - float(node["started"]))
                detail = f"on {node.get('host')}, about {max(0, left):.0f} s of agent time left"
            else:
                detail = f"placed ({job.get('executor')} {job.get('job_id') or job.get('task') or job.get('pid')})"
        elif status in (DONE, FAILED) and state.counted is not None:
            o = state.counted.outcome or {}
            detail = f"improvement {_fmt(o.get('improvement'))}" if status == DONE else str(o.get("reason"))
        elif status in (QUEUED, GAVE_UP) and state.infra_failures:
            detail = "; ".join(a.reason for a in state.attempts if a.finished and not a.counts)[-200:]
        out.append(
            {
                "run_key": cell.run_key,
                "agent": cell["agent"],
                "task": cell["task"],
                "model": cell["model"],
                "seed": cell["seed"],
                "state": status,
                "attempts": len(state.attempts),
                "detail": detail,
            }
        )
    return out


def render(study: Study, title: str | None = None) -> Any:
    """A rich Table of :func:`cell_rows` with a count of each state in the caption."""
    from rich.table import Table

    rows = cell_rows(study)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    table = Table(
        title=title or f"sweep {study.name}", caption=", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    )
    for c in COLUMNS:
        table.add_column(c, no_wrap=c == "run_key", overflow="fold")
    for row in rows:
        shown: dict[str, object] = dict(row)
        # a key's first 12 characters tell it apart; an agent or model given as a folder shows its own name
        table.add_row(
            *(
                str(shown[c])[:12]
                if c == "run_key"
                else short_path(str(shown[c]))
                if c in ("agent", "model")
                else str(shown[c])
                for c in COLUMNS
            )
        )
    return table
