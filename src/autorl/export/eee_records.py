"""One run's evaluations as Every Eval Ever schema objects (schema 0.3.0): a model's test score and the paired
improvement as ``evaluation_results`` entries (their uncertainty, an LLM judge as ``llm_scoring``, the generation
settings), one item as a per-instance sample, and the schema's rules for a datastore path component, a timestamp
and ``additional_details``. Pure functions of a run's record; :mod:`autorl.export.eee` lays them out as files.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from autorl.grader.items import ItemRecord
from autorl.record.schema import ResultRecord

__all__ = [
    "SCHEMA_VERSION",
    "component",
    "epoch",
    "improvement_result",
    "iso",
    "judge_scoring",
    "sample_record",
    "score_result",
    "strings",
    "uncertainty_record",
]

SCHEMA_VERSION = "0.3.0"
#: what a datastore path component may not hold (the validator's rule), and the names it reserves
_UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f]+')
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def component(text: str) -> str:
    """``text`` as one portable datastore path component."""
    out = _UNSAFE.sub("_", text.strip()).rstrip(". ") or "_"
    if out.lower() in ("data", "unknown", ".", "..") or out.split(".", 1)[0].upper() in _RESERVED:
        out = f"{out}_"
    return out


def strings(values: Mapping[str, Any]) -> dict[str, str]:
    """``additional_details``: every value a string (the schema's rule), none left out but the empty."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items() if v not in (None, "", [])}


def uncertainty_record(ci95: Any, n: int | None, stderr: float | None, method: str | None) -> dict[str, Any]:
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


def judge_scoring(record: Mapping[str, Any]) -> dict[str, Any] | None:
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
                    "additional_details": strings(
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
        "additional_details": strings(
            {
                k: extra.get(k)
                for k in ("judge_cost_usd", "judge_prompt_tokens", "judge_completion_tokens", "judge_errors")
            }
            | {"template_sha256": judge.get("template_sha256")}
        ),
    }


def score_result(
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
        "metric_id": f"{component(str(row['task']))}.score",
        "metric_name": "score",
        "metric_unit": "percent",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 100,
    }
    judge = judge_scoring(record) or judge_scoring(test)  # the base's test score is judged as the checkpoint's is
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
            "additional_details": strings(
                {
                    "split": "test (hidden: held by the grader)",
                    "benchmark_version": config.get("benchmark_version"),
                    "limit": meta.get("limit"),
                    "config_hash": test.get("config_hash"),
                }
            ),
        },
        "evaluation_timestamp": iso(row.get("timestamp")),
        "metric_config": metric,
        "score_details": {"score": float(score), **({"uncertainty": uncertainty} if uncertainty else {})},
        "generation_config": {
            "generation_args": {k: v for k, v in args.items() if v is not None},
            "additional_details": strings(
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


def improvement_result(result: ResultRecord, improvement: float) -> dict[str, Any]:
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
        "evaluation_timestamp": iso(row.get("timestamp")),
        "metric_config": {
            "evaluation_description": "the checkpoint's test score minus the base model's, paired on "
            "the same items, with the paired test's 95% interval",
            "metric_id": f"{component(str(row['task']))}.improvement",
            "metric_name": "improvement",
            "metric_unit": "percentage points",
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": -100,
            "max_score": 100,
        },
        "score_details": {
            "score": float(improvement),
            "details": strings(details),
            **(
                {"uncertainty": u}
                if (u := uncertainty_record(row.get("improvement_ci95"), None, None, "paired"))
                else {}
            ),
        },
    }


def iso(stamp: Any) -> str:
    try:
        return dt.datetime.strptime(str(stamp), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).isoformat()
    except ValueError:
        return str(stamp)


def epoch(stamp: Any) -> int:
    try:
        return int(dt.datetime.strptime(str(stamp), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc).timestamp())
    except ValueError:
        return 0


def sample_record(record: ItemRecord, head: Mapping[str, Any], base_score: float | None) -> dict[str, Any] | None:
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
        "metadata": strings({"split": "test", "base_model_score": base_score, "output_tokens": record.output_tokens}),
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
