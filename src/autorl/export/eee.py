"""``autorl export eee``: recorded runs as Every Eval Ever records (schema 0.3.0, the ``every-eval-ever`` package's
``eval.schema.json`` and ``instance_level_eval.schema.json``), in its datastore layout::

    OUT/data/<benchmark>/<developer>/<model>/<uuid>.json            the aggregate record
    OUT/data/<benchmark>/<developer>/<model>/<uuid>_samples.jsonl   one line per item (per-instance)

A run gives two evaluations, both on the hidden test split, both with their items: the base model's and the
post-trained checkpoint's (``autorl/<base>-<agent>-<run id>``, whose record also holds the improvement over the
base with its paired interval). A benchmark scored by an LLM judge names it in ``llm_scoring`` (with the judge's
cost); what the run cost (the driver model's tokens and dollars, GPU-seconds) is in the checkpoint's
``additional_details``, the schema having no field for it. File names are UUIDs derived from the run, so a
second export of the same run rewrites the same files.

The per-instance records hold the hidden test items (prompts and references) and the models' answers: publish
them only where the items may be public.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.evaluation.stats import summarize
from autorl.export.recorded import Selection
from autorl.grader.items import ItemRecord, read_run_items
from autorl.jsonio import write_json_atomic, write_text_atomic
from autorl.record.schema import ResultRecord
from autorl.version import __version__

__all__ = ["SCHEMA_VERSION", "export_eee"]

SCHEMA_VERSION = "0.3.0"
#: what a datastore path component may not hold (the validator's rule), and the names it reserves
_UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f]+')
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def _component(text: str) -> str:
    """``text`` as one portable datastore path component."""
    out = _UNSAFE.sub("_", text.strip()).rstrip(". ") or "_"
    if out.lower() in ("data", "unknown", ".", "..") or out.split(".", 1)[0].upper() in _RESERVED:
        out = f"{out}_"
    return out


def _strings(values: Mapping[str, Any]) -> dict[str, str]:
    """``additional_details``: every value a string (the schema's rule), none left out but the empty."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items() if v not in (None, "", [])}


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("\x00".join(parts).encode()).digest()[:16], version=4))


def _base_identity(result: ResultRecord) -> tuple[str, str]:
    """(model id, availability) of the run's base model: a hub id as it is, the built-in tiny model and a local
    folder under ``autorl`` and ``local``."""
    spec = str(result["row"]["base_model"])
    source = (result.get("meta") or {}).get("model_source")
    if source == "hub" and "/" in spec:
        org, _, name = spec.split("@", 1)[0].partition("/")
        return f"{_component(org)}/{_component(name)}", "open_weights"
    if source == "builtin" or spec.startswith("autorl:"):
        return f"autorl/{_component(spec.split(':', 1)[-1])}", "open_weights"
    return f"local/{_component(Path(spec).name or spec)}", "unknown"


def _uncertainty(ci95: Any, n: int | None, stderr: float | None, method: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(ci95, list | tuple) and len(ci95) == 2 and all(isinstance(v, int | float) for v in ci95):
        out["confidence_interval"] = {
            "lower": float(ci95[0]),
            "upper": float(ci95[1]),
            "confidence_level": 0.95,
            **({"method": method} if method else {}),
        }
    if isinstance(stderr, int | float):
        out["standard_error"] = {"value": float(stderr), "method": "analytic"}
    if isinstance(n, int):
        out["num_samples"] = n
    return out


def _judge(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """``llm_scoring`` for a benchmark whose scorer is an LLM judge (its evaluation record names it in
    ``extra.judge``), with what judging cost."""
    extra = record.get("extra") or {}
    judge = extra.get("judge")
    if not isinstance(judge, dict) or not judge.get("model"):
        return None
    model = str(judge["model"])
    return {
        "judges": [
            {
                "model_info": {
                    "name": model,
                    "id": model,
                    "additional_details": _strings(
                        {
                            "deployment_type": "externally_managed",
                            "model_availability": "unknown",
                            "base_url": judge.get("base_url"),
                        }
                    ),
                }
            }
        ],
        "input_prompt": str(judge.get("annotator") or judge.get("template") or "the benchmark's judge prompt"),
        "additional_details": _strings(
            {
                k: extra.get(k)
                for k in ("judge_cost_usd", "judge_prompt_tokens", "judge_completion_tokens", "judge_errors")
            }
            | {"template_sha256": judge.get("template_sha256")}
        ),
    }


def _score_result(
    result: ResultRecord, score: float, uncertainty: dict[str, Any], record: Mapping[str, Any]
) -> dict[str, Any]:
    """The test score of one model; ``record`` its evaluation record (the judge, if any), the test split's
    configuration from the run's own test evaluation."""
    row, meta = result["row"], result.get("meta") or {}
    test: Mapping[str, Any] = result.get("test") or {}
    config: Mapping[str, Any] = meta.get("eval_config") or record.get("config") or {}
    cfg: Mapping[str, Any] = config.get("eval_config") or {}
    metric: dict[str, Any] = {
        "evaluation_description": f"{row['task']}: the mean item score on the hidden test split (items the agent "
        "never saw), scored by autorl's grader",
        "metric_id": f"{_component(str(row['task']))}.score",
        "metric_name": "score",
        "metric_unit": "percent",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 100,
    }
    judge = _judge(record) or _judge(test)  # the base's test score is judged as the checkpoint's is
    if judge is not None:
        metric["llm_scoring"] = judge
    args = {
        "temperature": cfg.get("temperature"),
        "top_p": cfg.get("top_p"),
        "max_tokens": cfg.get("max_new_tokens"),
        "prompt_template": cfg.get("prompt_template"),
    }
    return {
        "evaluation_result_id": "test_score",
        "evaluation_name": str(row["task"]),
        "source_data": {
            "dataset_name": str(row["task"]),
            "source_type": "other",
            "additional_details": _strings(
                {
                    "split": "test (hidden: held by the grader)",
                    "benchmark_version": config.get("benchmark_version"),
                    "limit": meta.get("limit"),
                    "config_hash": test.get("config_hash"),
                }
            ),
        },
        "evaluation_timestamp": _iso(row.get("timestamp")),
        "metric_config": metric,
        "score_details": {"score": float(score), **({"uncertainty": uncertainty} if uncertainty else {})},
        "generation_config": {
            "generation_args": {k: v for k, v in args.items() if v is not None},
            "additional_details": _strings(
                {
                    "backend": meta.get("backend"),
                    "chat_template": cfg.get("chat_template"),
                    "few_shot": len(cfg.get("few_shot") or []),
                    "num_samples": cfg.get("num_samples"),
                    "system_prompt": cfg.get("system_prompt"),
                }
            ),
        },
    }


def _improvement_result(result: ResultRecord, improvement: float) -> dict[str, Any]:
    row = result["row"]
    details = {
        "p_value": row.get("p_value"),
        "beat_baseline": row.get("beat_baseline"),
        "base_score": row.get("baseline"),
        "headline_rule": row.get("headline_rule"),
        "dev_best_of_k": row.get("dev_best"),
        "dev_k": row.get("dev_k"),
    }
    return {
        "evaluation_result_id": "improvement",
        "evaluation_name": f"{row['task']} improvement over the base model",
        "source_data": {
            "dataset_name": str(row["task"]),
            "source_type": "other",
            "additional_details": {"split": "test (hidden: held by the grader)"},
        },
        "evaluation_timestamp": _iso(row.get("timestamp")),
        "metric_config": {
            "evaluation_description": "the checkpoint's test score minus the base model's, paired on "
            "the same items, with the paired test's 95% interval",
            "metric_id": f"{_component(str(row['task']))}.improvement",
            "metric_name": "improvement",
            "metric_unit": "percentage points",
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": -100,
            "max_score": 100,
        },
        "score_details": {
            "score": float(improvement),
            "details": _strings(details),
            **({"uncertainty": u} if (u := _uncertainty(row.get("improvement_ci95"), None, None, "paired")) else {}),
        },
    }


def _iso(stamp: Any) -> str:
    try:
        return dt.datetime.strptime(str(stamp), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).isoformat()
    except ValueError:
        return str(stamp)


def _sample(record: ItemRecord, head: Mapping[str, Any], base_score: float | None) -> dict[str, Any] | None:
    if record.score is None:
        return None
    raw, reference = record.prompt or "", [record.reference] if record.reference is not None else []
    sample: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        **head,
        "sample_id": record.id,
        "sample_hash": hashlib.sha256(json.dumps([raw, reference]).encode()).hexdigest(),
        "input": {"raw": raw, "reference": reference},
        "answer_attribution": [],
        "evaluation": {"score": record.score, "is_correct": record.score >= 1.0},
        "error": record.error,
        "metadata": _strings({"split": "test", "base_model_score": base_score, "output_tokens": record.output_tokens}),
    }
    if record.trajectory:  # an episode: the environment's observations and the model's actions, turn by turn
        turns = [(role, text) for obs, act in record.trajectory for role, text in (("user", obs), ("assistant", act))]
        sample.update(
            interaction_type="multi_turn",
            output=None,
            messages=[{"turn_idx": i, "role": role, "content": text} for i, (role, text) in enumerate(turns)],
        )
        sample["evaluation"]["num_turns"] = len(record.trajectory)
    else:
        sample.update(interaction_type="single_turn", output={"raw": list(record.answers)}, messages=None)
    return sample


def export_eee(
    selection: Selection, out: Path, *, organization: str = "autorl", log: Callable[[str], None] = lambda _: None
) -> list[Path]:
    """Write the Every Eval Ever records of the selected runs under ``out/data/``; the aggregate files written.
    A run without a test score has no result to export (said through ``log``)."""
    written: list[Path] = []
    retrieved = str(int(time.time()))
    for result in selection.results:
        row = result["row"]
        if row.get("best_score") is None or row.get("baseline") is None:
            log(f"run {row['run_id']}: no test score, nothing to export")
            continue
        written += _run_records(result, out, organization, retrieved, selection.study, log)
    if not written:
        raise UsageError("nothing exported: no selected run has a test score")
    return written


@dataclass(frozen=True)
class _Evaluation:
    """One model's evaluation in a run: what its aggregate record and its samples are made of."""

    role: str  # "base" or "checkpoint"
    model_id: str
    model: dict[str, Any]  # model_info less its id
    relationship: str
    results: list[dict[str, Any]]
    records: list[ItemRecord]


def _evaluations(result: ResultRecord, organization: str, log: Callable[[str], None]) -> list[_Evaluation]:
    """The base model's evaluation and the checkpoint's, each with its items where the run's store has them."""
    row, meta = result["row"], result.get("meta") or {}
    test: Mapping[str, Any] = result.get("test") or {}
    base_score, ckpt_score, improvement = row.get("baseline"), row.get("best_score"), row.get("improvement")
    if base_score is None or ckpt_score is None:  # no headline: :func:`export_eee` leaves such a run out
        return []
    base_items: list[ItemRecord] = []
    ckpt_items: list[ItemRecord] = []
    try:
        found = read_run_items(result, "test")
        base_items = [p.base for p in found.items if p.base is not None]
        ckpt_items = [p.checkpoint for p in found.items if p.checkpoint is not None]
        for note in found.notes:
            log(f"run {row['run_id']}: {note}")
    except UsageError as exc:
        log(f"{exc}: aggregate records only")
    base_id, availability = _base_identity(result)
    agent, run_id = str(row["agent"]), str(row["run_id"])
    base_name = base_id.split("/", 1)[1]
    stats = summarize([r.score for r in base_items if r.score is not None]) if base_items else None
    base_uncertainty = _uncertainty(stats.ci95, stats.n, stats.stderr, stats.method) if stats else {}
    ckpt_uncertainty = _uncertainty(
        test.get("ci95"), test.get("n"), test.get("stderr"), (test.get("extra") or {}).get("ci_method")
    )
    base = _Evaluation(
        "base",
        base_id,
        {
            "name": str(row["base_model"]),
            "developer": base_id.split("/", 1)[0],
            "details": {
                "model_availability": availability,
                "model_revision": meta.get("model_revision"),
                "autorl_model_spec": row["base_model"],
            },
        },
        "third_party",
        [_score_result(result, float(base_score), base_uncertainty, result.get("baseline") or {})],
        base_items,
    )
    checkpoint = _Evaluation(
        "checkpoint",
        f"autorl/{_component(f'{base_name}-{agent}-{run_id}')}",
        {
            "name": f"{row['base_model']} post-trained by {agent} (autorl run {run_id})",
            "developer": organization,
            "details": {
                "model_availability": "unknown",
                "base_model": row["base_model"],
                "agent": agent,
                "submission": test.get("submission_id"),
                "driver_model": row.get("driver_model"),
                "driver_llm_tokens": row.get("llm_tokens"),
                "driver_llm_cost_usd": row.get("llm_cost_usd"),
                "llm_usage_source": row.get("llm_usage_source"),
                "agent_gpu_seconds": row.get("agent_gpu_seconds"),
                "grader_gpu_seconds": row.get("grader_gpu_seconds"),
                "time_budget_s": row.get("timeout_s"),
                "duration_s": row.get("duration_s"),
                "sandbox": row.get("sandbox"),
                "audit_flags": row.get("audit_flags"),
            },
        },
        "first_party",
        [
            _score_result(result, float(ckpt_score), ckpt_uncertainty, test),
            *([_improvement_result(result, improvement)] if improvement is not None else []),
        ],
        ckpt_items,
    )
    return [base, checkpoint]


def _run_records(
    result: ResultRecord, out: Path, organization: str, retrieved: str, study: str | None, log: Callable[[str], None]
) -> list[Path]:
    """The run's two aggregate records and their samples under ``out``; the aggregate files."""
    row, meta = result["row"], result.get("meta") or {}
    task = str(row["task"])
    evaluations = _evaluations(result, organization, log)
    base_scores = {r.id: r.score for r in evaluations[0].records}
    common = {
        "run_id": row["run_id"],
        "study": study,
        "autorl_version": meta.get("autorl_version"),
        "seed": row.get("seed"),
    }
    written = []
    for ev in evaluations:
        evaluation_id = f"{_component(task)}/{ev.model_id}/{_epoch(row.get('timestamp'))}"
        folder = Path("data") / _component(task) / Path(*ev.model_id.split("/", 1))
        name = _uuid(str(row["run_id"]), ev.role, str(meta.get("runner_run_id") or ""), str(row.get("timestamp")))
        head = {
            "evaluation_id": evaluation_id,
            "model_id": ev.model_id,
            "evaluation_name": task,
            "evaluation_result_id": "test_score",
        }
        samples = [
            s
            for s in (_sample(r, head, base_scores.get(r.id) if ev.role == "checkpoint" else None) for r in ev.records)
            if s is not None
        ]
        aggregate: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "evaluation_timestamp": _iso(row.get("timestamp")),
            "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": "autorl",
                "source_type": "evaluation_run",
                "source_organization_name": organization,
                "evaluator_relationship": ev.relationship,
                "additional_details": _strings({**common, "role": ev.role}),
            },
            "model_info": {
                "name": ev.model["name"],
                "id": ev.model_id,
                "developer": ev.model["developer"],
                "inference_platform": "local",
                "inference_engine": {"name": str(meta.get("backend") or "unknown")},
                "additional_details": {"deployment_type": "self_deployed", **_strings(ev.model["details"])},
            },
            "eval_library": {"name": "autorl", "version": __version__},
            "evaluation_results": ev.results,
        }
        if samples:
            text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples)
            samples_path = folder / f"{name}_samples.jsonl"
            write_text_atomic(out / samples_path, text, mode=0o644)
            aggregate["detailed_evaluation_results"] = {
                "format": "jsonl",
                "file_path": samples_path.as_posix(),
                "hash_algorithm": "sha256",
                "checksum": hashlib.sha256(text.encode()).hexdigest(),
                "total_rows": len(samples),
            }
        write_json_atomic(out / folder / f"{name}.json", aggregate, mode=0o644)
        written.append(out / folder / f"{name}.json")
    return written


def _epoch(stamp: Any) -> int:
    try:
        return int(dt.datetime.strptime(str(stamp), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp())
    except ValueError:
        return 0
