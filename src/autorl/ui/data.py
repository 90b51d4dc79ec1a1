"""What the dashboard shows, read from the ledger, the run directories and (for live runs) the grader's store.

Everything here is plain data (dicts and lists) so that the HTML pages, the SVG figures and the JSON API
show the same numbers.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from autorl.ledger import Ledger

#: columns of the runs table: key, title, kind (for formatting and sorting)
RUN_COLUMNS = (
    ("timestamp", "date", "text"), ("task", "task", "text"), ("agent", "agent", "text"),
    ("base_model", "base model", "text"), ("baseline", "baseline", "num"), ("best_score", "best dev", "num"),
    ("test_score", "test", "num"), ("improvement", "improvement", "num"),
    ("improvement_ci95", "95% CI", "ci"), ("test_improvement", "test improvement", "num"),
    ("submissions", "submissions", "num"), ("duration_s", "duration", "secs"), ("status", "status", "text"),
)
SORTABLE = {key for key, _, _ in RUN_COLUMNS if key != "improvement_ci95"}
#: how long after its deadline a run with no result is still shown as running
LIVE_GRACE_S = 3 * 3600.0


def _live_status(info: Mapping[str, Any], now: float) -> str:
    deadline = info.get("deadline")
    limit = float(deadline) if deadline else float(info.get("started", now)) + float(info.get("timeout_s", 0)) + 3600
    return "running" if now < limit + LIVE_GRACE_S else "abandoned"


def live_row(info: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """A runs-table row for a run in progress, from the grader's own store (never files the agent writes)."""
    now = time.time() if now is None else now
    store = read_store(Path(info["store_dir"])) if info.get("store_dir") else {"submissions": [], "baseline": None}
    scored = [s for s in store["submissions"] if s["score"] is not None]
    best = max(scored, key=lambda s: s["score"], default=None)
    baseline = store["baseline"]["score"] if store["baseline"] else None
    return {
        "run_id": info["run_id"], "timestamp": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"])),
        "task": info["task"], "agent": info["agent"], "base_model": info["base_model"], "baseline": baseline,
        "best_score": best["score"] if best else None, "test_score": None,
        "improvement": (best["score"] - baseline) if best and baseline is not None else None,
        "improvement_ci95": None, "test_improvement": None, "test_improvement_ci95": None,
        "submissions": len(store["submissions"]), "duration_s": round(now - float(info["started"]), 1),
        "success": None, "status": _live_status(info, now), "workspace": info.get("workspace"),
        "audit_flags": [], "live": True,
    }


def read_store(store_dir: Path) -> dict[str, Any]:
    """Submissions and the dev baseline from a grader's SQLite store, opened read-only."""
    db_path = store_dir / "grader.db"
    out: dict[str, Any] = {"submissions": [], "baseline": None}
    if not db_path.is_file():
        return out
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
        try:
            db.row_factory = sqlite3.Row
            for r in db.execute("SELECT id, created_at, finished_at, status, score, record FROM submissions "
                                "ORDER BY id"):
                record = json.loads(r["record"]) if r["record"] else {}
                out["submissions"].append({"submission_id": r["id"], "created_at": r["created_at"],
                                           "finished_at": r["finished_at"], "status": r["status"],
                                           "score": r["score"], "ci95": record.get("ci95")})
            b = db.execute("SELECT score, record FROM baseline WHERE split='dev'").fetchone()
            if b:
                record = json.loads(b["record"]) if b["record"] else {}
                out["baseline"] = {"score": b["score"], "ci95": record.get("ci95"), "n": record.get("n")}
        finally:
            db.close()
    except (sqlite3.Error, ValueError):
        pass
    return out


def status_of(row: Mapping[str, Any]) -> str:
    if row.get("status"):
        return str(row["status"])
    return "success" if row.get("success") else "failed"


def all_rows(ledger: Ledger, now: float | None = None) -> list[dict[str, Any]]:
    """Finished runs (from the ledger) and runs in progress, each with a ``status``."""
    rows = []
    for row in ledger.rows():
        row["status"] = status_of(row)
        rows.append(row)
    done = {r["run_id"] for r in rows}
    rows += [live_row(info, now) for info in ledger.live() if info["run_id"] not in done]
    return rows


def filter_rows(rows: Iterable[dict[str, Any]], params: Mapping[str, str]) -> list[dict[str, Any]]:
    """Filters ``task``, ``agent``, ``model`` (exact), ``since``/``until`` (YYYY-MM-DD), ``status``; then
    ``sort`` (a column) and ``order`` (asc|desc; default: newest first)."""
    out = []
    for r in rows:
        if any(params.get(k) and str(r.get(col)) != params[k]
               for k, col in (("task", "task"), ("agent", "agent"), ("model", "base_model"), ("status", "status"))):
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
    present = [r for r in out if r.get(key) is not None]
    missing = [r for r in out if r.get(key) is None]
    present.sort(key=lambda r: (r[key], r["run_id"]) if not isinstance(r[key], str) else (r[key].lower(), r["run_id"]),
                 reverse=reverse)
    return present + missing


def choices(rows: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    rows = list(rows)
    return {k: sorted({str(r[col]) for r in rows if r.get(col) is not None})
            for k, col in (("task", "task"), ("agent", "agent"), ("model", "base_model"), ("status", "status"))}


def run_detail(ledger: Ledger, run_id: str, now: float | None = None) -> dict[str, Any] | None:
    """The run's result record (finished) or what is known so far (live), with its timeline."""
    result = ledger.run(run_id)
    if result is not None:
        row = dict(result["row"])
        row["status"] = status_of(row)
        flags = ledger.audit(run_id)
        return {"run_id": run_id, "live": False, "row": row, "result": result, "audit": flags,
                "timeline": timeline_of_result(result), "workspace": row.get("workspace")}
    info = next((i for i in ledger.live() if i["run_id"] == run_id), None)
    if info is None:
        return None
    row = live_row(info, now)
    store = read_store(Path(info["store_dir"]))
    return {"run_id": run_id, "live": row["status"] == "running", "row": row, "result": None, "audit": [],
            "info": info, "timeline": timeline_of_store(store, info), "workspace": info.get("workspace")}


def _point(sub: Mapping[str, Any], t0: float) -> dict[str, Any]:
    at = sub.get("finished_at") or sub.get("created_at")
    return {"submission_id": sub["submission_id"], "t_s": round(float(sub["created_at"]) - t0, 2) if sub.get("created_at") else None,
            "scored_t_s": round(float(at) - t0, 2) if at else None, "score": sub.get("score"), "ci95": sub.get("ci95"),
            "status": sub.get("status")}


def timeline_of_result(result: Mapping[str, Any]) -> dict[str, Any]:
    meta = result.get("meta", {})
    subs = result.get("submissions", [])
    t0 = meta.get("agent_started") or min((float(s["created_at"]) for s in subs if s.get("created_at")), default=0.0)
    baseline = result.get("baseline") or {}
    test = result.get("test") or None
    return {
        "points": [_point(s, float(t0)) for s in subs],
        "baseline": {"score": baseline.get("score"), "ci95": baseline.get("ci95")} if baseline else None,
        "test": {"submission_id": test.get("submission_id"), "score": test.get("score"), "ci95": test.get("ci95"),
                 "baseline_score": test.get("baseline_score")} if test and test.get("score") is not None else None,
        "timeout_s": meta.get("timeout_s") or result.get("row", {}).get("duration_s"),
        "elapsed_s": None,
    }


def timeline_of_store(store: Mapping[str, Any], info: Mapping[str, Any]) -> dict[str, Any]:
    t0 = float(info.get("agent_started") or info["started"])
    return {
        "points": [_point(s, t0) for s in store["submissions"]],
        "baseline": store["baseline"],
        "test": None,
        "timeout_s": info.get("timeout_s"),
        "elapsed_s": round(time.time() - t0, 1),
    }


def tail(path: Path, limit: int = 16_000) -> str | None:
    """The last ``limit`` bytes of a text file, from its first whole line."""
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return None
    text = data.decode(errors="replace")
    if size > limit and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


def trajectory(workspace: Path, limit: int = 500) -> list[dict[str, Any]] | None:
    """The llm agent's turns from ``trajectory.jsonl`` (or a coding CLI's ``transcript.jsonl``), parsed."""
    for name in ("trajectory.jsonl", "transcript.jsonl"):
        path = workspace / name
        if not path.is_file():
            continue
        turns = []
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return None
        for line in lines[-limit:]:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                turns.append(_turn(record, name))
        return turns
    return None


def _turn(record: dict[str, Any], source: str) -> dict[str, Any]:
    if "event" in record:
        return {"kind": "event", "event": record["event"], "detail": {k: v for k, v in record.items() if k != "event"}}
    if "step" in record and isinstance(record.get("message"), dict):
        msg = record["message"]
        calls = []
        for call in msg.get("tool_calls") or []:
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            calls.append({"id": call.get("id") if isinstance(call, dict) else None, "name": fn.get("name"),
                          "arguments": fn.get("arguments")})
        return {"kind": "turn", "step": record["step"], "content": msg.get("content"), "tool_calls": calls,
                "tool_results": record.get("tool_results") or [], "usage": record.get("usage") or {},
                "latency_s": record.get("latency_s"), "time": record.get("time")}
    return {"kind": "record", "source": source, "type": record.get("type"), "detail": record}


def compare(rows: Iterable[dict[str, Any]], task: str, metric: str = "auto") -> dict[str, Any]:
    """Per agent on ``task``: runs, mean improvement and its 95% t-interval over runs.

    ``metric``: ``test_improvement`` (the number that counts), ``improvement`` (dev), or ``auto``: test where
    every finished run of the task has it, else dev.
    """
    from scipy import stats

    done = [r for r in rows if r.get("task") == task and not r.get("live")]
    if metric == "auto":
        metric = "test_improvement" if done and all(r.get("test_improvement") is not None for r in done) \
            else "improvement"
    if metric not in ("test_improvement", "improvement"):
        raise ValueError("metric must be test_improvement, improvement or auto")
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in done:
        groups.setdefault(str(r["agent"]), []).append(r)
    out = []
    for agent, runs in sorted(groups.items()):
        values = [float(r[metric]) for r in runs if r.get(metric) is not None]
        n = len(values)
        mean = sum(values) / n if n else None
        ci = None
        if n >= 2 and mean is not None:
            sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
            half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
            ci = [mean - half, mean + half]
        out.append({"agent": agent, "runs": len(runs), "n": n, "mean": mean, "ci95": ci, "values": values,
                    "success_rate": sum(1 for r in runs if r.get("success")) / len(runs),
                    "models": sorted({str(r["base_model"]) for r in runs})})
    return {"task": task, "metric": metric, "agents": out}
