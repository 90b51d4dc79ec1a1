"""``autorl export mlflow``: recorded runs logged to an MLflow tracking store, one MLflow run per autorl run.

Each MLflow run holds the run's settings as params (task, agent, base model, seed, budget, backend, sandbox,
config hash, ...), every number of its ``results.csv`` row as a metric (the interval bounds as ``*_low`` /
``*_high``, flags as 0/1), the dev score trajectory as metrics over steps (``dev_score`` and
``dev_best_so_far`` at each submission, at the time it was scored), the audit's open flags as a tag, and as artifacts the run's card (``card.md``), its trajectory
figure (``trajectory.svg``) and its record (``result.json``), all made from the record, never read from the
agent's folder. A study's runs are children of one parent run named after the study. A run already logged to
the experiment (its ``autorl.run_id`` tag) is left as it is, so exporting again adds only new runs.

mlflow is an optional extra (``autorl[mlflow]``: ``mlflow-skinny`` and, for ``sqlite:///`` stores, SQLAlchemy
and Alembic), imported when called.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from autorl.errors import MissingDependencyError, UsageError, extra_install
from autorl.export.recorded import Selection
from autorl.record.card import card_markdown, trajectory_svg
from autorl.record.frames import column_kinds
from autorl.record.schema import ResultRecord

__all__ = ["PARAMS", "export_mlflow", "run_metrics"]

#: the row's columns logged as params (settings, not outcomes)
PARAMS = (
    "task",
    "agent",
    "base_model",
    "seed",
    "timeout_s",
    "sandbox",
    "config_hash",
    "driver_model",
    "run_key",
    "sweep",
    "end_reason",
    "headline_rule",
)
#: the run's meta entries logged as params
META_PARAMS = ("backend", "limit", "benchmark_options", "model_source", "model_revision", "autorl_version", "python")
#: MLflow keeps param values up to this length (older servers: 500)
_PARAM_LIMIT = 500
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:+-]+$")
TAG_RUN, TAG_STUDY = "autorl.run_id", "autorl.study"


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError:
        raise MissingDependencyError("autorl export mlflow", extra_install("mlflow")) from None
    return mlflow


def _ms(stamp: Any) -> int | None:
    try:
        when = dt.datetime.strptime(str(stamp), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None
    return int(when.timestamp() * 1000)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float) and value == value:
        return float(value)
    return None


def run_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's numbers as metrics: every numeric and boolean column that has a value (booleans as 0/1), and
    each interval's bounds as ``<column>_low`` / ``<column>_high``; the settings among them (:data:`PARAMS`)
    are params instead."""
    metrics: dict[str, float] = {}
    for name, kind in column_kinds().items():
        if name in PARAMS:
            continue
        value = row.get(name)
        if kind.rstrip("?") in ("float", "int", "bool"):
            number = _number(value)
            if number is not None:
                metrics[name] = number
        elif name.endswith("_ci95") and isinstance(value, list | tuple) and len(value) == 2:
            low, high = _number(value[0]), _number(value[1])
            if low is not None and high is not None:
                metrics[f"{name}_low"], metrics[f"{name}_high"] = low, high
    return metrics


def _params(result: ResultRecord) -> dict[str, str]:
    row, meta = result["row"], result.get("meta") or {}
    values = {**{k: row.get(k) for k in PARAMS}, **{k: meta.get(k) for k in META_PARAMS}}
    network = (meta.get("sandbox") or {}).get("network") if isinstance(meta.get("sandbox"), dict) else None
    values["network"] = network
    out = {}
    for key, value in values.items():
        if value in (None, "", {}, []):
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        out[key] = text if len(text) <= _PARAM_LIMIT else text[: _PARAM_LIMIT - 1] + "…"
    return out


def _tags(row: Mapping[str, Any]) -> list[Any]:
    from mlflow.entities import RunTag

    flags = row.get("audit_flags") or []
    return [
        RunTag("autorl.end_reason", str(row.get("end_reason") or "")),
        RunTag("autorl.audit_flags", ", ".join(str(f) for f in flags) if flags else "clean"),
    ]


def _trajectory(result: ResultRecord) -> list[tuple[str, float, int, int]]:
    """(key, value, step, time in ms) of each scored submission: its dev score and the best so far."""
    points: list[tuple[str, float, int, int]] = []
    best: float | None = None
    subs = sorted(
        (s for s in result.get("submissions") or [] if isinstance(s, dict)),
        key=lambda s: int(s.get("submission_id") or 0),
    )
    for sub in subs:
        score = _number(sub.get("score"))
        if sub.get("status") != "done" or score is None:
            continue
        best = score if best is None else max(best, score)
        at = _number(sub.get("finished_at") or sub.get("created_at")) or 0.0
        step = int(sub.get("submission_id") or 0)
        points += [("dev_score", score, step, int(at * 1000)), ("dev_best_so_far", best, step, int(at * 1000))]
    return points


def _logged(client: Any, experiment_id: str, key: str, value: str, parent: str | None = None) -> str | None:
    """The id of a live MLflow run in the experiment tagged ``key = value`` (under ``parent`` when given)."""
    if not _SAFE_ID.match(value):
        return None
    query = f"tags.`{key}` = '{value}'" + (f" and tags.`mlflow.parentRunId` = '{parent}'" if parent else "")
    found = client.search_runs([experiment_id], filter_string=query, max_results=1)
    return str(found[0].info.run_id) if found else None


def _reachable(tracking_uri: str) -> None:
    """A tracking server that does not answer is a one-line error at once (MLflow's client retries for minutes)."""
    if not tracking_uri.startswith(("http://", "https://")):
        return
    import httpx

    try:
        httpx.get(tracking_uri.rstrip("/") + "/health", timeout=10.0)
    except httpx.HTTPError as exc:
        raise UsageError(
            f"MLflow store {tracking_uri}: the server does not answer ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


def export_mlflow(
    selection: Selection, tracking_uri: str, *, experiment: str = "autorl", log: Callable[[str], None] = lambda _: None
) -> list[str]:
    """Log the selected runs into the MLflow store at ``tracking_uri`` (experiment ``experiment``, created when
    missing); the MLflow run ids, one per autorl run (a run logged before keeps its id and is not logged again)."""
    mlflow = _mlflow()
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    _reachable(tracking_uri)
    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    except mlflow.exceptions.MlflowException as exc:
        raise UsageError(f"MLflow store {tracking_uri}: {str(exc).splitlines()[0][:300]}") from None
    parent = None
    if selection.study is not None:
        parent = _logged(client, experiment_id, TAG_STUDY, selection.study)
        if parent is None:
            parent = client.create_run(
                experiment_id, run_name=selection.study, tags={TAG_STUDY: selection.study}
            ).info.run_id
            client.log_batch(
                parent, params=[Param("study", selection.study), Param("runs", str(len(selection.results)))]
            )
            client.set_terminated(parent)
    ids = []
    for result in selection.results:
        row = result["row"]
        run_id = str(row["run_id"])
        done = _logged(client, experiment_id, TAG_RUN, run_id, parent)
        if done is not None:
            log(f"run {run_id}: already logged as MLflow run {done}")
            ids.append(done)
            continue
        start = _ms(row.get("timestamp"))
        tags = {TAG_RUN: run_id, **({"mlflow.parentRunId": parent, TAG_STUDY: str(selection.study)} if parent else {})}
        mlrun = client.create_run(experiment_id, start_time=start, run_name=run_id, tags=tags)
        rid = mlrun.info.run_id
        when = start or 0
        metrics = [Metric(k, v, when, 0) for k, v in run_metrics(row).items()]
        metrics += [Metric(k, v, t, step) for k, v, step, t in _trajectory(result)]
        params = [Param(k, v) for k, v in _params(result).items()]
        for i in range(0, max(len(metrics), 1), 1000):  # MLflow takes at most 1000 metrics and 100 params a batch
            client.log_batch(
                rid, metrics=metrics[i : i + 1000], params=params if i == 0 else [], tags=_tags(row) if i == 0 else []
            )
        client.log_text(rid, card_markdown(result), "card.md")
        client.log_text(rid, trajectory_svg(result), "trajectory.svg")
        client.log_text(rid, json.dumps(result, indent=2, default=str), "result.json")
        duration = _number(row.get("duration_s"))
        client.set_terminated(
            rid, status="FINISHED", end_time=when + int(duration * 1000) if start and duration is not None else None
        )
        log(f"run {run_id}: logged as MLflow run {rid}")
        ids.append(rid)
    return ids
