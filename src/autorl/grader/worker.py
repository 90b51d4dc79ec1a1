"""One evaluation in a fresh process: ``python -m autorl.grader.worker JOB.json``.

A crash, an OOM or a hang here fails that one evaluation; the grader keeps serving. The result is
written atomically to the job's ``result_path``; the exit code is 0 on success.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from autorl.evaluation.identity import config_hash, model_hash, stable_hash
from autorl.evaluation.run import EvalRecord, evaluate_model, write_json_atomic


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from autorl.registry import get_backend, get_benchmark

    benchmark = get_benchmark(job["task"])(job.get("benchmark_options") or {})
    backend = get_backend(job["backend"])(job.get("backend_options") or {})
    cache_file = None
    if job.get("cache_dir"):
        # baselines are reused across runs when benchmark, eval config, backend and model bytes all match
        # (the config hash covers the hidden items themselves: another secret or data version is another key)
        benchmark.prepare_eval_data(Path(job["hidden_dir"]))
        key = stable_hash([config_hash(benchmark, job["split"], backend, Path(job["hidden_dir"])), model_hash(Path(job["model_dir"])), job.get("limit")])
        cache_file = Path(job["cache_dir"]) / benchmark.name / f"{key}.json"
        if cache_file.is_file():
            cached: dict[str, Any] = json.loads(cache_file.read_text())
            cached.setdefault("extra", {})["cached"] = True
            return cached
    record: EvalRecord = evaluate_model(
        benchmark,
        backend,
        Path(job["model_dir"]),
        split=job["split"],
        hidden_dir=Path(job["hidden_dir"]),
        base_model_dir=Path(job["base_model_dir"]) if job.get("base_model_dir") else None,
        limit=job.get("limit"),
        per_item_path=Path(job["per_item_path"]) if job.get("per_item_path") else None,
    )
    if cache_file is not None:
        write_json_atomic(cache_file, record.to_dict())
    return record.to_dict()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(Path(argv[0]).read_text())
    result_path = Path(job["result_path"])
    try:
        record = run_job(job)
    except Exception as exc:
        traceback.print_exc()
        write_json_atomic(result_path, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    write_json_atomic(result_path, {"ok": True, "record": record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
