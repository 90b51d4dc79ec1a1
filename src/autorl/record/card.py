"""A run's card: ``card.md`` in its run folder, the disclosure a reader of its numbers needs (agent and driver
model, base model, budgets and what was used, hardware, sandbox and network, dev k and the test-once rule, audit
flags, versions, config hash), with the score trajectory as ``trajectory.svg`` drawn by the dashboard's own
chart code (:func:`autorl.record.charts.timeline_svg`).

Written from the run's record alone (``result.json``'s content), never from a file the agent wrote. The run
folder is the agent's workspace: both files are written whole through a fresh temp file renamed over the name,
so a link the agent left there is replaced, never written through.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autorl.jsonio import write_text_atomic
from autorl.record import charts
from autorl.record.metrics import EFFICIENCY_COLUMNS, SCALAR_METRICS
from autorl.record.schema import ResultRecord
from autorl.record.timeline import timeline_of_result

__all__ = [
    "CARD_NAME",
    "SVG_NAME",
    "card_markdown",
    "study_card_markdown",
    "trajectory_svg",
    "write_card",
    "write_study_card",
]

CARD_NAME = "card.md"
SVG_NAME = "trajectory.svg"


def _v(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"[{value[0]:+.2f}, {value[1]:+.2f}]"
    # one line, no markdown table or markup breakage from a value
    return str(value).replace("|", "\\|").replace("\n", " ").replace("`", "'")[:300]


def _table(pairs: list[tuple[str, Any]]) -> str:
    return "| | |\n| --- | --- |\n" + "".join(f"| {k} | {_v(v)} |\n" for k, v in pairs)


def _utc(epoch: Any) -> str | None:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS UTC``; None for anything else."""
    if isinstance(epoch, bool) or not isinstance(epoch, int | float):
        return None
    try:
        return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return None


def _when(row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """When the run started (its row's timestamp, UTC), finished and was recorded (a record kept before those
    times were kept says only when it started)."""
    parts = [f"started {_v(row.get('timestamp'))} UTC"]
    for label, key in (("finished", "finished_at"), ("recorded", "recorded_at")):
        when = _utc(meta.get(key))
        if when:
            parts.append(f"{label} {when}")
    return ", ".join(parts)


def card_markdown(result: ResultRecord) -> str:
    """The card of a run record (as ``result.json`` holds it)."""
    row: Mapping[str, Any] = result.get("row") or {}
    meta: Mapping[str, Any] = result.get("meta") or {}
    sandbox: Mapping[str, Any] = meta["sandbox"] if isinstance(meta.get("sandbox"), Mapping) else {}
    gateway: Mapping[str, Any] = meta["llm_gateway"] if isinstance(meta.get("llm_gateway"), Mapping) else {}
    flags = [f"{f.get('name')} ({f.get('severity')})" for f in result.get("audit") or [] if isinstance(f, Mapping)]
    title = f"{row.get('agent')} on {row.get('task')} from {row.get('base_model')}"
    parts = [
        f"# Run card: {_v(title)}\n",
        f"Run `{_v(row.get('run_id'))}`: {_when(row, meta)}. Every figure comes from the grader's records and "
        "the orchestrator's own measurements, never from a file the agent wrote.\n",
        "## Result (held-out test, scored once)\n",
        _table(
            [
                ("test baseline", row.get("baseline")),
                ("test score", row.get("best_score")),
                ("improvement", row.get("improvement")),
                ("improvement 95% CI", row.get("improvement_ci95")),
                ("p-value", row.get("p_value")),
                ("beat baseline (95% CI above 0)", row.get("beat_baseline")),
                ("finished with a test score (success)", row.get("success")),
                ("end", row.get("end_reason")),
            ]
        ),
        "\nThe checkpoint the grader selected on dev (best of the k dev scores the agent saw) is scored once on "
        "the hidden test split, paired against the base model on the same items. The dev figures below are the "
        "agent's feedback, optimistic; the best of k on test is the peers' protocol, optimistic too.\n",
        _table(
            [
                ("dev k (scored submissions)", row.get("dev_k")),
                ("dev best", row.get("dev_best")),
                ("dev improvement", row.get("dev_improvement")),
                ("best of k on test (optimistic peer figure)", row.get("test_best_of_k")),
                ("its k", row.get("test_best_of_k_k")),
                ("selection gap", row.get("test_selection_gap")),
            ]
        ),
        "\n![score trajectory](trajectory.svg)\n",
        *(
            [
                "## Off-target (test split, selected vs base)\n",
                _table(
                    [
                        (
                            f"{_v(e.get('task'))}: change [95% CI]",
                            f"{_v(e.get('change'))} {_v(e.get('ci95'))}"
                            + (" REGRESSED" if e.get("regressed") else "")
                            + (f" ({_v(e.get('error'))})" if e.get("error") else ""),
                        )
                        for e in row.get("off_target") or []
                        if isinstance(e, Mapping)
                    ]
                ),
            ]
            if row.get("off_target")
            else []
        ),
        "## Agent and models\n",
        _table(
            [
                ("agent", row.get("agent")),
                ("driver model", row.get("driver_model")),
                ("base model", row.get("base_model")),
                ("model source", meta.get("model_source")),
                ("model revision", meta.get("model_revision")),
                ("task", row.get("task")),
                ("seed", row.get("seed")),
            ]
        ),
        "\n## Budgets and what was used\n",
        _table(
            [
                ("agent time budget, s", meta.get("timeout_s")),
                ("run duration, s", row.get("duration_s")),
                ("preparing the model and data before the run, s", meta.get("prepare_s")),
                ("agent started", _utc(meta.get("agent_started"))),
                ("agent deadline", _utc(meta.get("deadline"))),
                ("time used ratio", row.get("time_used_ratio")),
                ("submissions", row.get("submissions")),
                ("LLM budget, USD", gateway.get("budget_usd")),
                ("LLM budget, tokens", gateway.get("budget_tokens")),
                ("LLM tokens", row.get("llm_tokens")),
                ("LLM cost, USD", row.get("llm_cost_usd")),
                *((name.replace("_", " "), row.get(name)) for name in EFFICIENCY_COLUMNS),
            ]
        ),
        "\n## Hardware, sandbox and network\n",
        _table(
            [
                ("inference backend", meta.get("backend")),
                ("sandbox", row.get("sandbox")),
                ("network", sandbox.get("network")),
                ("sandbox warning", sandbox.get("warning")),
                ("evaluation item limit", meta.get("limit")),
            ]
        ),
        "\n## Process (the grader's record)\n",
        _table([(name.replace("_", " "), row.get(name)) for name in SCALAR_METRICS]),
        "\n## Audit\n",
        ("Open flags: " + ", ".join(_v(f) for f in flags) + "\n") if flags else "No open audit flag.\n",
        "\n## Versions\n",
        _table(
            [
                ("autorl", meta.get("autorl_version")),
                ("python", meta.get("python")),
                ("config hash", row.get("config_hash")),
                *(
                    (f"harness file {name}", digest)
                    for name, digest in sorted((meta.get("harness_hashes") or {}).items())
                ),
            ]
        ),
    ]
    return "\n".join(parts)


def trajectory_svg(result: ResultRecord) -> str:
    """The card's figure: the dev score of each submission over the run, the best so far, the test score."""
    row = result.get("row") or {}
    title = f"{row.get('agent')} on {row.get('task')}: dev score per submission"
    return charts.timeline_svg(timeline_of_result(result), title)


def write_card(result: ResultRecord) -> Path | None:
    """``card.md`` and ``trajectory.svg`` into the run's folder; None (and nothing raised) when they cannot be
    written: a card never stands in the way of a recorded run."""
    run_dir = result.get("run_dir") or (result.get("row") or {}).get("workspace")
    if not run_dir:
        return None
    folder = Path(str(run_dir))
    try:
        write_text_atomic(folder / SVG_NAME, trajectory_svg(result), mode=0o644)
        write_text_atomic(folder / CARD_NAME, card_markdown(result), mode=0o644)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return folder / CARD_NAME


def study_card_markdown(report: Mapping[str, Any], spec: Mapping[str, Any] | None = None) -> str:
    """The card of a study report (:func:`autorl.sweep.report.study_report`): per cell the held-out test
    improvement over seeds beside the noise floor, the rates, and the means of the process and cost figures."""
    import json

    lines = [
        f"# Study card: {_v(report.get('sweep'))}\n",
        "Per (task, base model, agent, driver model, config hash) cell: the mean held-out test improvement "
        "over seeds with its 95% t-interval (a run without a test score counts as 0), the test-scored rate "
        "(`success`), the rate of runs whose own interval is above 0 (`beat_baseline`), the noise floor "
        "measured by `autorl noise` (sd), and means over seeds. Each run's own card is `card.md` in its "
        "folder.\n",
        "| task | model | agent (driver) | runs | test-scored | beat baseline | mean improvement | 95% CI | "
        "noise floor (sd) | off-target regressed | improvement per GPU-hour | monotonic ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in report.get("cells") or []:
        agent = f"{c.get('agent')} ({c.get('driver_model')})" if c.get("driver_model") else c.get("agent")
        cells = [
            c.get("task"),
            c.get("base_model"),
            agent,
            c.get("runs"),
            c.get("success_rate"),
            c.get("beat_baseline_rate"),
            c.get("mean"),
            c.get("ci95"),
            (c.get("noise_floor") or {}).get("sd"),
            c.get("off_target_regressed_rate"),
            (c.get("efficiency_means") or {}).get("improvement_per_gpu_hour"),
            (c.get("process_means") or {}).get("monotonic_ratio"),
        ]
        lines.append("| " + " | ".join(_v(v) for v in cells) + " |")
    missing = report.get("missing") or []
    lines.append(f"\nKeys without a result: {len(missing)}. Failures: {_v(report.get('failure_rule'))}\n")
    if spec:
        lines += ["## The spec\n", "```json", json.dumps(spec, indent=1, default=str, sort_keys=True), "```", ""]
    return "\n".join(lines)


def write_study_card(report: Mapping[str, Any], folder: Path, spec: Mapping[str, Any] | None = None) -> Path | None:
    """``card.md`` into a study's folder; None (and nothing raised) when it cannot be written."""
    try:
        write_text_atomic(folder / CARD_NAME, study_card_markdown(report, spec), mode=0o644)
    except (OSError, ValueError, TypeError):
        return None
    return folder / CARD_NAME
