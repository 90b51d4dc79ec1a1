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

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.evaluation.stats import summarize
from autorl.export.eee_records import (
    SCHEMA_VERSION,
    component,
    epoch,
    improvement_result,
    iso,
    sample_record,
    score_result,
    strings,
    uncertainty_record,
)
from autorl.export.recorded import Selection
from autorl.grader.items import ItemRecord, read_run_items
from autorl.jsonio import write_json_atomic, write_text_atomic
from autorl.record.schema import ResultRecord
from autorl.version import __version__

__all__ = ["SCHEMA_VERSION", "export_eee"]


def _uuid(*parts: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("\x00".join(parts).encode()).digest()[:16], version=4))


def _base_identity(result: ResultRecord) -> tuple[str, str]:
    """(model id, availability) of the run's base model: a hub id as it is, the built-in tiny model and a local
    folder under ``autorl`` and ``local``."""
    spec = str(result["row"]["base_model"])
    source = (result.get("meta") or {}).get("model_source")
    if source == "hub" and "/" in spec:
        org, _, name = spec.split("@", 1)[0].partition("/")
        return f"{component(org)}/{component(name)}", "open_weights"
    if source == "builtin" or spec.startswith("autorl:"):
        return f"autorl/{component(spec.split(':', 1)[-1])}", "open_weights"
    return f"local/{component(Path(spec).name or spec)}", "unknown"


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
    base_uncertainty = uncertainty_record(stats.ci95, stats.n, stats.stderr, stats.method) if stats else {}
    ckpt_uncertainty = uncertainty_record(
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
        [score_result(result, float(base_score), base_uncertainty, result.get("baseline") or {})],
        base_items,
    )
    checkpoint = _Evaluation(
        "checkpoint",
        f"autorl/{component(f'{base_name}-{agent}-{run_id}')}",
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
            score_result(result, float(ckpt_score), ckpt_uncertainty, test),
            *([improvement_result(result, improvement)] if improvement is not None else []),
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
        evaluation_id = f"{component(task)}/{ev.model_id}/{epoch(row.get('timestamp'))}"
        folder = Path("data") / component(task) / Path(*ev.model_id.split("/", 1))
        name = _uuid(str(row["run_id"]), ev.role, str(meta.get("runner_run_id") or ""), str(row.get("timestamp")))
        head = {
            "evaluation_id": evaluation_id,
            "model_id": ev.model_id,
            "evaluation_name": task,
            "evaluation_result_id": "test_score",
        }
        samples = [
            s
            for s in (
                sample_record(r, head, base_scores.get(r.id) if ev.role == "checkpoint" else None) for r in ev.records
            )
            if s is not None
        ]
        aggregate: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "evaluation_id": evaluation_id,
            "evaluation_timestamp": iso(row.get("timestamp")),
            "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": "autorl",
                "source_type": "evaluation_run",
                "source_organization_name": organization,
                "evaluator_relationship": ev.relationship,
                "additional_details": strings({**common, "role": ev.role}),
            },
            "model_info": {
                "name": ev.model["name"],
                "id": ev.model_id,
                "developer": ev.model["developer"],
                "inference_platform": "local",
                "inference_engine": {"name": str(meta.get("backend") or "unknown")},
                "additional_details": {"deployment_type": "self_deployed", **strings(ev.model["details"])},
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
