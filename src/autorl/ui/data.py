"""What the dashboard shows, read from the ledger, the run directories and (for live runs) the grader's store.

Everything here is plain data (dicts and lists) so that the HTML pages, the SVG figures and the JSON API
show the same numbers.
The agent's trajectory is :mod:`autorl.ui.trajectory`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from autorl import untrusted
from autorl.record.aggregate import FAILURE_RULE, AgentComparison, aggregate_runs, differences
from autorl.record.display import outcome
from autorl.record.ledger import Ledger
from autorl.record.row import RunRow, dev_figures
from autorl.record.schema import AuditFlag, LedgerRow, LiveRecord, Recovery, ResultRecord, RowRecord
from autorl.record.timeline import Band, Timeline, point, timeline_of_result

if TYPE_CHECKING:
    from autorl.grader.schema import Best, SubmissionRecord

#: columns of the runs table: key, title, kind (for formatting and sorting). The headline is the held-out
#: test (the dev-selected checkpoint scored once on test, against the test baseline); the dev figure is the
#: best of k dev scores the agent saw, biased upward, and is labelled so.
RUN_COLUMNS = (
    ("run_id", "run", "text"),
    ("task", "task", "text"),
    ("agent", "agent", "text"),
    ("base_model", "base model", "text"),
    ("sandbox", "sandbox", "sandbox"),
    ("baseline", "test baseline", "num"),
    ("best_score", "test score", "num"),
    ("improvement", "improvement (test)", "num"),
    ("improvement_ci95", "95% CI", "ci"),
    ("dev_improvement", "dev: best of k, optimistic", "dev"),
    ("p_value", "p", "p"),
    ("success", "finished with a test score", "yesno"),
    ("beat_baseline", "beat baseline (95% CI above 0)", "yesno"),
    ("audit_flags", "audit", "audit"),
    ("sweep", "study", "text"),
    ("status", "status", "text"),
)
SORTABLE = {key for key, _, _ in RUN_COLUMNS if key != "improvement_ci95"}


class StatusRow(RowRecord):
    """A run's row with its status (the run page's)."""

    status: str


class TableRow(LedgerRow, StatusRow):
    """A row of the runs table: a recorded run's ledger row, or a run in flight's (:class:`LiveRow`), with its
    status."""


class LiveRow(TableRow, Recovery):
    """A run in flight's row of the runs table (:func:`live_row`): no headline yet, and ``success`` and
    ``beat_baseline`` None (unknown, not False); its grader's store, and for a lost run the command that records it."""

    store_dir: str | None
    live: bool


class StoreView(TypedDict):
    """The grader's records of a run in progress (:func:`read_store`)."""

    submissions: list[SubmissionRecord]
    best: Best | None
    baseline: Band | None


class RunDetail(TypedDict):
    """What the run page shows (:func:`run_detail`): the run's row, its record (finished) or its facts (in
    flight), its audit and its timeline."""

    run_id: str
    live: bool
    row: StatusRow
    result: ResultRecord | None
    audit: list[AuditFlag]
    timeline: Timeline
    workspace: str | None
    store_dir: str | None
    info: NotRequired[LiveRecord]


class LogTail(TypedDict, total=False):
    """The tail of a log (:func:`tail`): its text and whether it was cut, or why it could not be read; the
    grader's log says how many polling lines it left out."""

    text: str
    truncated: bool
    error: str
    hidden: int


def _live_status(info: LiveRecord, now: float) -> str:
    """``running`` while the run's orchestrator is alive, ``lost`` once it is gone (``autorl recover`` records it)."""
    from autorl.runs.liveness import run_status

    return "running" if run_status(info, now).alive else "lost"


def live_row(info: LiveRecord, now: float | None = None) -> LiveRow:
    """A runs-table row for a run in progress, from the grader's own store (never files the agent writes):
    every :class:`~autorl.record.row.RunRow` column, the dev figures as the grader reports them, no headline
    (there is no test score until the run ends)."""
    now = time.time() if now is None else now
    store = read_store(Path(info["store_dir"])) if info.get("store_dir") else _EMPTY_STORE
    baseline = store["baseline"]
    recorded = RunRow(
        run_id=info["run_id"],
        timestamp=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"])),
        task=info["task"],
        agent=info["agent"],
        base_model=info["base_model"],
        submissions=len(store["submissions"]),
        duration_s=round(now - float(info["started"]), 1),
        workspace=info.get("workspace") or "",
        sandbox=info.get("sandbox"),
        **dev_figures(store["submissions"], store["best"], baseline["score"] if baseline else None),
    ).to_dict()
    status = _live_status(info, now)
    recovery: Recovery = {"recover": f"autorl recover {info['run_id']}"} if status == "lost" else {}
    # before its test score a run has no success or beat_baseline: None, unknown, where a recorded row has a bool;
    # and a run in flight written by an older version may have no workspace
    return {
        **recorded,
        "workspace": info.get("workspace"),  # type: ignore[typeddict-item]
        "success": None,  # type: ignore[typeddict-item]
        "beat_baseline": None,  # type: ignore[typeddict-item]
        "status": status,
        "store_dir": info.get("store_dir"),
        "live": True,
        **recovery,
    }


_EMPTY_STORE: StoreView = {"submissions": [], "baseline": None, "best": None}


def read_store(store_dir: Path) -> StoreView:
    """The grader's records of a run in progress (its public submission records, its best, the dev baseline),
    from its store opened read-only (:meth:`autorl.grader.store.Store.read_only`); empty when unreadable."""
    from autorl.grader import records
    from autorl.grader.store import Store

    try:
        store = Store.read_only(store_dir / "grader.db")
    except (OSError, sqlite3.Error):
        return _EMPTY_STORE.copy()
    try:
        subs = store.all()
        base = store.baseline("dev")
    except (sqlite3.Error, ValueError, TypeError, KeyError):
        return _EMPTY_STORE.copy()
    finally:
        store.close()
    rec = base.get("record") if base else None
    return {
        "submissions": records.public_all(subs, base),
        "best": records.best(subs),
        "baseline": {
            "score": base["score"],
            "ci95": rec.get("ci95") if rec else None,
            "n": rec.get("n") if rec else None,
        }
        if base
        else None,
    }


def status_of(row: Mapping[str, Any]) -> str:
    """A run's status: ``running`` or ``lost`` while it is in flight, then its :func:`~autorl.record.display.outcome`
    (``beat baseline``, ``no clear change``, ``below baseline``, ``no test score``)."""
    if row.get("status"):
        return str(row["status"])
    return outcome(row)


def all_rows(ledger: Ledger, now: float | None = None) -> list[TableRow]:
    """Finished runs (from the ledger) and runs in progress, each with a ``status``."""
    rows: list[TableRow] = []
    for recorded in ledger.rows():
        row: TableRow = {**recorded, "status": status_of(recorded)}
        rows.append(row)
    done = {r["run_id"] for r in rows}
    rows += [live_row(info, now) for info in ledger.live() if info["run_id"] not in done]
    return rows


def filter_rows(rows: Iterable[TableRow], params: Mapping[str, str]) -> list[TableRow]:
    """Filters ``task``, ``agent``, ``model`` (exact), ``since``/``until`` (YYYY-MM-DD), ``status``; then
    ``sort`` (a column) and ``order`` (asc|desc; default: newest first)."""
    out = []
    for r in rows:
        if any(
            params.get(k) and str(r.get(col)) != params[k]
            for k, col in (("task", "task"), ("agent", "agent"), ("model", "base_model"), ("status", "status"))
        ):
            continue
        day = str(r.get("timestamp", ""))[:10]
        if params.get("since") and day < params["since"]:
            continue
        if params.get("until") and day > params["until"]:
            continue
        out.append(r)
    key = params.get("sort") or "timestamp"
    if key not in SORTABLE:
        key = "timestamp"
    reverse = (params.get("order") or ("desc" if key == "timestamp" else "asc")) == "desc"
    present = [(r.get(key), r) for r in out if r.get(key) is not None]
    missing = [r for r in out if r.get(key) is None]
    present.sort(key=lambda vr: (vr[0].lower() if isinstance(vr[0], str) else vr[0], vr[1]["run_id"]), reverse=reverse)
    return [r for _, r in present] + missing


def choices(rows: Iterable[TableRow]) -> dict[str, list[str]]:
    rows = list(rows)
    return {
        k: sorted({str(r.get(col)) for r in rows if r.get(col) is not None})
        for k, col in (("task", "task"), ("agent", "agent"), ("model", "base_model"), ("status", "status"))
    }


def run_detail(ledger: Ledger, run_id: str, now: float | None = None) -> RunDetail | None:
    """The run's result record (finished) or what is known so far (live), with its timeline."""
    result = ledger.run(run_id)
    if result is not None:
        row: StatusRow = {**result["row"], "status": status_of(result["row"])}
        flags = ledger.audit(run_id)
        return {
            "run_id": run_id,
            "live": False,
            "row": row,
            "result": result,
            "audit": flags,
            "timeline": timeline_of_result(result),
            "workspace": row.get("workspace"),
            "store_dir": (result.get("meta") or {}).get("store_dir"),
        }
    info = next((i for i in ledger.live() if i["run_id"] == run_id), None)
    if info is None:
        return None
    row = live_row(info, now)
    store = read_store(Path(info["store_dir"]))
    return {
        "run_id": run_id,
        "live": row["status"] == "running",
        "row": row,
        "result": None,
        "audit": [],
        "info": info,
        "timeline": timeline_of_store(store, info),
        "workspace": info.get("workspace"),
        "store_dir": info.get("store_dir"),
    }


def timeline_of_store(store: StoreView, info: LiveRecord) -> Timeline:
    t0 = float(info.get("agent_started") or info["started"])
    return {
        "points": [point(s, t0) for s in store["submissions"]],
        "baseline": store["baseline"],
        "test": None,
        "timeout_s": info.get("timeout_s"),
        "elapsed_s": round(time.time() - t0, 1),
    }


#: the most of an agent-written log the run page shows (its tail)
LOG_LIMIT = 16_000


def tail(root: Path, name: str, limit: int = LOG_LIMIT) -> LogTail | None:
    """The last ``limit`` bytes of ``root/name`` from its first whole line, as ``{"text": ...}``.

    Read through :mod:`autorl.untrusted` (no link followed, regular files only): a file that cannot be read
    safely is ``{"error": why}``; an absent one is None.
    """
    try:
        data = untrusted.read_tail(root, name, limit=limit + 1)
    except untrusted.UntrustedFileError as exc:
        if "does not exist" in str(exc):
            return None
        return {"error": str(exc)}
    cut = len(data) > limit
    text = data[-limit:].decode(errors="replace")
    if cut and "\n" in text:
        text = text.split("\n", 1)[1]
    return {"text": text, "truncated": cut}


def grader_log(store_dir: str | None) -> LogTail | None:
    """The tail of the grader's own log, from the grader's store (never the workspace, which the agent controls)."""
    from autorl.grader.process import grader_log_path

    if not store_dir:
        return None
    store = Path(store_dir)
    log = tail(store, str(grader_log_path(store).relative_to(store)))
    if log is None or "text" not in log:
        return log
    # the orchestrator polls /admin/state every few seconds: those access lines buried everything else
    lines = str(log["text"]).splitlines(keepends=True)
    kept = [line for line in lines if not any(poll in line for poll in POLL_LINES)]
    hidden = len(lines) - len(kept)
    return {**log, "text": "".join(kept), "hidden": hidden} if hidden else log


#: access-log lines of the orchestrator's polling, left out of the grader-log panel (counted instead)
POLL_LINES = ('"GET /admin/state ',)


def no_comparison(task: str) -> AgentComparison:
    """The comparison of a task without runs."""
    return {"task": task, "metric": "improvement", "failure_rule": FAILURE_RULE, "groups": [], "differs": {}}


def compare(rows: Iterable[TableRow], task: str) -> AgentComparison:
    """The agents on ``task`` by :func:`autorl.record.aggregate.aggregate_runs`: mean held-out test improvement with
    its 95% t-interval over runs, failed runs counted as 0, one group per base model and config hash."""
    groups = aggregate_runs(rows, task=task)
    return {
        "task": task,
        "metric": "improvement",
        "failure_rule": FAILURE_RULE,
        "groups": [g.as_dict() for g in groups],
        "differs": differences(groups),
    }
