"""Is a run's orchestrator alive? For ``autorl results``, the dashboard, ``autorl doctor``, a sweep and ``autorl
recover``: light, it reads the heartbeat (:class:`autorl.procs.lease.Heartbeat`) and the grader store's record of a
loss, and loads no grader.

A lost run is one the ledger still lists as live (:meth:`autorl.record.ledger.Ledger.live`) whose orchestrator is
gone.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required, TypedDict

from autorl.procs.lease import HEARTBEAT_FILE, LOST_AT_KEY, process_start_time
from autorl.record.ledger import Ledger
from autorl.record.schema import LiveRecord, Recovery

__all__ = [
    "LIVE_GRACE_S",
    "InFlight",
    "OrchestratorStatus",
    "StatusRecord",
    "in_flight",
    "lost_runs",
    "orchestrator_status",
    "run_status",
]

#: a heartbeat older than this many intervals means its orchestrator is gone (when it runs on another host)
_STALE_INTERVALS = 3.0
#: how long after its deadline a run without a heartbeat is still taken for live
LIVE_GRACE_S = 3 * 3600.0


class StatusRecord(TypedDict):
    """:class:`OrchestratorStatus` as a dict."""

    alive: bool
    lost_at: float | None
    detail: str


@dataclass(frozen=True)
class OrchestratorStatus:
    """Whether a run's orchestrator is alive, and if not since when and how that is known."""

    alive: bool
    #: when it was lost (the grader's own record, else the heartbeat's last beat); None while alive or unknown
    lost_at: float | None
    detail: str

    def to_dict(self) -> StatusRecord:
        return {"alive": self.alive, "lost_at": self.lost_at, "detail": self.detail}


def orchestrator_status(store_dir: Path | str, *, now: float | None = None) -> OrchestratorStatus | None:
    """Is the orchestrator of the run whose grader store is ``store_dir`` alive? None when nothing says (no
    heartbeat and no recorded loss: the store is gone, or was written before heartbeats).

    Lost when its grader recorded the loss, when (same host) its pid is gone or names another process, or
    (another host) when its heartbeat is older than three intervals.
    """
    store_dir = Path(store_dir)
    now = time.time() if now is None else now
    lost_at = _recorded_loss(store_dir)
    if lost_at is not None:
        return OrchestratorStatus(False, lost_at, "the grader saw its orchestrator go")
    path = store_dir / HEARTBEAT_FILE
    try:
        beat = json.loads(path.read_text())
        mtime = path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(beat, dict):
        return OrchestratorStatus(False, mtime, "unreadable heartbeat")
    if beat.get("host") == socket.gethostname() and isinstance(beat.get("pid"), int):
        start = process_start_time(int(beat["pid"]))
        if start is not None and start == beat.get("pid_start"):
            return OrchestratorStatus(True, None, f"pid {beat['pid']} running")
        return OrchestratorStatus(False, mtime, f"pid {beat['pid']} is gone")
    interval = float(beat.get("interval_s") or 5.0)
    if now - mtime <= _STALE_INTERVALS * interval:
        return OrchestratorStatus(True, None, f"heartbeat {now - mtime:.0f} s ago from {beat.get('host')}")
    return OrchestratorStatus(False, mtime, f"no heartbeat from {beat.get('host')} for {now - mtime:.0f} s")


def _recorded_loss(store_dir: Path) -> float | None:
    from autorl.grader.store import Store

    db = store_dir / "grader.db"
    if not db.is_file():
        return None
    try:
        store = Store.read_only(db)
    except Exception:  # an unreadable store only means no recorded loss
        return None
    try:
        value = store.get_meta(LOST_AT_KEY)
    except Exception:
        value = None
    finally:
        store.close()
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def run_status(live: Mapping[str, Any], now: float | None = None) -> OrchestratorStatus:
    """Whether a run the ledger lists as live still has its orchestrator: its store's heartbeat says
    (:func:`autorl.procs.lease.orchestrator_status`); without one (the store is gone, or the run began before
    heartbeats), it is live until :data:`LIVE_GRACE_S` past its deadline."""
    now = time.time() if now is None else now
    store_dir = live.get("store_dir")
    status = orchestrator_status(Path(str(store_dir)), now=now) if store_dir else None
    if status is not None:
        return status
    started = float(live.get("started") or now)
    deadline = live.get("deadline")
    limit = float(deadline) if deadline else started + float(live.get("timeout_s") or 0) + 3600
    if now < limit + LIVE_GRACE_S:
        return OrchestratorStatus(True, None, "no heartbeat; within its time")
    where = "no grader store" if not store_dir or not Path(str(store_dir)).exists() else "no heartbeat"
    return OrchestratorStatus(False, None, f"{where}, {(now - limit) / 3600:.0f} h past its deadline")


class InFlight(LiveRecord, Recovery, total=False):
    """A run in flight (its ledger row) with its orchestrator's status."""

    status: Required[str]
    lost_at: Required[float | None]
    detail: Required[str]


def in_flight(ledger: Ledger, now: float | None = None) -> list[InFlight]:
    """Every run the ledger lists as in flight, newest first: its live row with ``status`` (``running`` or
    ``lost``), ``lost_at`` and ``detail``, and for a lost one ``recover``, the command that records it."""
    out: list[InFlight] = []
    for live in ledger.live():
        status = run_status(live, now)
        recovery: Recovery = {} if status.alive else {"recover": f"autorl recover {live['run_id']}"}
        out.append(
            {
                **live,
                "status": "running" if status.alive else "lost",
                "lost_at": status.lost_at,
                "detail": status.detail,
                **recovery,
            }
        )
    return out


def lost_runs(ledger: Ledger, now: float | None = None) -> list[InFlight]:
    """The runs in flight whose orchestrator is gone (:func:`in_flight`'s ``lost`` ones), newest first."""
    return [r for r in in_flight(ledger, now) if r["status"] == "lost"]
