"""``eval_mode: opencompass``: OpenCompass in its own environment, its results read with suspicion.

OpenCompass conflicts with trl (datasets<4, numpy<2, httpx==0.27.2), so it runs under the interpreter named
by ``AUTORL_OPENCOMPASS_PYTHON`` (or the folder's ``opencompass_python`` key). Its CLI exits 0 even when a
task fails, so a run counts only if every dataset has a result file with a numeric accuracy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl import EvaluationError, Evaluator, ItemResult, Progress

if TYPE_CHECKING:
    from autorl import Backend, Benchmark, Item

SETUP = ("python3 -m venv ~/.venvs/opencompass && ~/.venvs/opencompass/bin/pip install opencompass==0.5.4 "
         "'pyarrow<22' 'transformers<5', then export AUTORL_OPENCOMPASS_PYTHON=~/.venvs/opencompass/bin/python")


def interpreter(config: dict[str, Any]) -> str:
    """The OpenCompass environment's Python; a one-line error says how to create it when it is absent."""
    python = os.environ.get("AUTORL_OPENCOMPASS_PYTHON") or config.get("opencompass_python")
    if not python:
        raise EvaluationError(f"eval_mode opencompass needs its own environment: {SETUP}")
    python = str(Path(python).expanduser())
    probe = subprocess.run([python, "-c", "import opencompass"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        raise EvaluationError(f"{python} cannot import opencompass; create the environment: {SETUP}")
    return python


def config_source(dataset_module: str, dataset_var: str, model_dir: str, max_out_len: int, batch_size: int,
                  num_gpus: int = 1) -> str:
    return textwrap.dedent(f"""\
        from mmengine.config import read_base
        from opencompass.models import HuggingFaceCausalLM

        with read_base():
            from {dataset_module} import {dataset_var} as _datasets

        datasets = _datasets
        models = [dict(
            type=HuggingFaceCausalLM, abbr="submission", path={model_dir!r}, tokenizer_path={model_dir!r},
            model_kwargs=dict(trust_remote_code=False), tokenizer_kwargs=dict(trust_remote_code=False),
            max_out_len={max_out_len}, max_seq_len=4096, batch_size={batch_size}, run_cfg=dict(num_gpus={num_gpus}),
        )]
        """)


def _correct(value: object) -> float:
    """1.0 only for a plain true (or a non-empty list of them): a string "False" or ``[False]`` is not correct."""
    if isinstance(value, list):
        return 1.0 if value and all(v is True or (type(v) is int and v == 1) for v in value) else 0.0
    return 1.0 if value is True or (type(value) in (int, float) and value == 1) else 0.0


def read_results(workdir: Path, expected: int) -> list[tuple[str, float, list[float] | None]]:
    """(dataset, accuracy in [0, 100], per-item correctness if OpenCompass wrote details) per dataset."""
    files = sorted(workdir.glob("*/results/submission/*.json"))
    results = []
    for path in files:
        data = json.loads(path.read_text())
        accuracy = data.get("accuracy", data.get("score")) if isinstance(data, dict) else None
        if not (type(accuracy) in (int, float) and isinstance(accuracy, (int, float)) and 0.0 <= accuracy <= 100.0):
            raise EvaluationError(f"OpenCompass result {path.name} has no accuracy in [0, 100]: {str(data)[:200]}")
        details = data.get("details")
        per_item = None
        # items are the numbered entries (OpenCompass adds others, such as "type": "GEN"); AccEvaluator's hold
        # no verdict, only the prediction and the reference: then the accuracy is all there is
        entries = [d for k, d in details.items() if str(k).isdigit()] if isinstance(details, dict) else []
        if entries and all(isinstance(d, dict) and ("correct" in d or "is_correct" in d) for d in entries):
            per_item = [_correct(d.get("correct", d.get("is_correct"))) for d in entries]
        results.append((path.stem, float(accuracy), per_item))
    if len(results) < expected or not results:
        raise EvaluationError(
            f"OpenCompass finished but wrote {len(results)} result file(s) for {expected} dataset(s); "
            f"see the logs under {workdir} (its exit status is 0 even when tasks fail)"
        )
    return results


class OpenCompassEvaluator(Evaluator):
    """Runs OpenCompass on the whole model; items are OpenCompass's own, reported per dataset."""

    def evaluate(self, benchmark: Benchmark, items: Sequence[Item], backend: Backend,
                 progress: Progress | None = None) -> list[ItemResult]:
        from autorl_smith.benchmark import SmithBenchmark

        assert isinstance(benchmark, SmithBenchmark)
        cfg = benchmark.folder.config
        module, var = cfg.get("opencompass_dataset"), cfg.get("opencompass_dataset_var", "datasets")
        if not module:
            raise EvaluationError(f"{benchmark.folder.path}/config.yaml: opencompass mode needs opencompass_dataset")
        model_dir = getattr(backend, "model_dir", None) or benchmark.options.get("model_dir")
        if not model_dir:
            raise EvaluationError("the opencompass evaluator needs the checkpoint path (backend.model_dir)")
        python = interpreter(cfg)
        workdir = benchmark.work_dir() / "opencompass" / time.strftime("%Y%m%dT%H%M%S")
        workdir.mkdir(parents=True)
        config_py = workdir / "autorl_config.py"
        # OpenCompass's local runner asserts it has as many GPUs as a model asks for: none on a CPU machine
        gpus = int(cfg.get("opencompass_num_gpus", 1 if shutil.which("nvidia-smi") else 0))
        config_py.write_text(config_source(str(module), str(var), str(model_dir),
                                           benchmark.config().max_new_tokens, int(cfg.get("batch_size", 16)), gpus))
        log = workdir / "opencompass.log"
        with log.open("w") as f:
            proc = subprocess.run([python, "-m", "opencompass.cli.main", str(config_py), "-w", str(workdir)],
                                  stdout=f, stderr=subprocess.STDOUT, timeout=float(cfg.get("timeout_s", 24 * 3600)))
        results = read_results(workdir, int(cfg.get("opencompass_expected_datasets", 1)))
        if proc.returncode != 0:
            raise EvaluationError(f"OpenCompass exited with {proc.returncode}; see {log}")
        out: list[ItemResult] = []
        for dataset, accuracy, per_item in results:
            if per_item:
                out += [ItemResult(f"{dataset}-{k}", v, [], None, {"dataset": dataset}) for k, v in enumerate(per_item)]
            else:
                out.append(ItemResult(dataset, accuracy / 100.0, [], None, {"dataset": dataset, "aggregate": True}))
        if progress:
            progress(len(out))
        return out
