"""``eval_mode: opencompass``: OpenCompass in its own environment, its results read with suspicion.

It scores the items it is given (the grader's hidden split, drawn with the secret), and only they: they are
written as OpenCompass's local custom dataset (a question/answer jsonl, no download) in a private temporary
folder, with the folder's ``prompt_template`` as the prompt and exact match (EMEvaluator) as the scorer, which
gives a verdict per item.

OpenCompass conflicts with trl (datasets<4, numpy<2, httpx==0.27.2), so it runs under the interpreter named
by ``AUTORL_OPENCOMPASS_PYTHON`` (or the folder's ``opencompass_python`` key). Its CLI exits 0 even when a
task fails, so a run counts only if the dataset has a result file with a numeric accuracy and a verdict for
each item given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from autorl import EvaluationError, Evaluator, ItemResult, Progress

if TYPE_CHECKING:
    from autorl import Backend, Benchmark, EvalConfig, Item
    from autorl_smith.folder import SmithFolder


class SmithTask(Protocol):
    """What this evaluator reads of a smith benchmark (the benchmark module builds it: no import back)."""

    folder: SmithFolder
    options: dict[str, Any]

    def config(self) -> EvalConfig: ...

    def work_dir(self) -> Path: ...


SETUP = (
    "python3 -m venv ~/.venvs/opencompass && ~/.venvs/opencompass/bin/pip install opencompass==0.5.4 "
    "'pyarrow<22' 'transformers<5', then export AUTORL_OPENCOMPASS_PYTHON=~/.venvs/opencompass/bin/python"
)


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


#: the custom-dataset options a folder may set under ``opencompass_dataset`` (OpenCompass's own meta keys)
DATASET_KEYS = ("human_prompt", "bot_prompt")


def dataset_meta(name: str, data_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """OpenCompass's local custom dataset (a question/answer jsonl, no download) at ``data_path``, scored by exact
    match with a verdict per item; the folder's ``prompt_template`` is its prompt."""
    own = config.get("opencompass_dataset") or {}
    if not isinstance(own, dict) or not all(k in DATASET_KEYS and isinstance(v, str) for k, v in own.items()):
        raise EvaluationError(
            f"config.yaml: opencompass_dataset must be a mapping of {', '.join(DATASET_KEYS)} to "
            "text; the items scored are always the grader's (a named OpenCompass dataset is not "
            "read)"
        )
    return {
        "abbr": name,
        "path": str(data_path),
        "meta_path": str(data_path) + ".meta.json",
        "data_type": "qa",
        "infer_method": "gen",
        "human_prompt": str(config.get("prompt_template", "{question}")),
        **own,
    }


def write_items(items: Sequence[Item], data_path: Path) -> None:
    """The given items, and only they, in order, as the custom dataset's rows (the answer a list of one, as
    EMEvaluator wants: given a string it would test the prediction against its characters)."""
    with data_path.open("w", encoding="utf-8") as f:
        for item in items:
            f.write(
                json.dumps(
                    {"question": str(item.input.get("question", "")), "answer": [str(item.reference)]},
                    ensure_ascii=False,
                )
                + "\n"
            )


def config_source(dataset: dict[str, Any], model_dir: str, max_out_len: int, batch_size: int, num_gpus: int = 1) -> str:
    return textwrap.dedent(f"""\
        from opencompass.models import HuggingFaceCausalLM
        from opencompass.openicl.icl_evaluator import EMEvaluator

        datasets = [dict(evaluator=EMEvaluator, **{dataset!r})]
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
        entries = (
            [d for _, d in sorted((int(k), d) for k, d in details.items() if str(k).isdigit())]
            if isinstance(details, dict)
            else details
            if isinstance(details, list)
            else []
        )
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
    """Runs OpenCompass on the given items, written as its local custom dataset in a private temporary folder."""

    def evaluate(
        self, benchmark: Benchmark, items: Sequence[Item], backend: Backend, progress: Progress | None = None
    ) -> list[ItemResult]:
        if not hasattr(benchmark, "folder") or not hasattr(benchmark, "work_dir"):
            raise EvaluationError(f"the opencompass evaluator scores smith folders, not {benchmark.name}")
        task = cast("SmithTask", benchmark)  # only smith benchmarks name this evaluator (SmithBenchmark.evaluator)
        cfg = task.folder.config
        model_dir = getattr(backend, "model_dir", None) or task.options.get("model_dir")
        if not model_dir:
            raise EvaluationError("the opencompass evaluator needs the checkpoint path (backend.model_dir)")
        if not items:
            return []
        python = interpreter(cfg)
        workdir = task.work_dir() / "opencompass" / time.strftime("%Y%m%dT%H%M%S")
        workdir.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="autorl-opencompass-") as private:
            command = prepare_run(task, items, str(model_dir), Path(private), workdir)
            log = workdir / "opencompass.log"
            with log.open("w") as f:
                # cwd: OpenCompass keeps a .cache/ of dataset sizes where it runs
                proc = subprocess.run(
                    [python, *command],
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    cwd=workdir,
                    timeout=float(cfg.get("timeout_s", 24 * 3600)),
                )
        results = read_results(workdir, 1)
        if proc.returncode != 0:
            raise EvaluationError(f"OpenCompass exited with {proc.returncode}; see {log}")
        ((dataset, accuracy, per_item),) = results
        if progress:
            progress(len(items))
        if per_item is None:
            raise EvaluationError(
                f"OpenCompass wrote no verdict per item for {dataset} (accuracy {accuracy}); see {workdir}"
            )
        if len(per_item) != len(items):
            raise EvaluationError(
                f"OpenCompass scored {len(per_item)} items of the {len(items)} it was given; see {workdir}"
            )
        return [ItemResult(item.id, v, [], None, {"dataset": dataset}) for item, v in zip(items, per_item, strict=True)]


def prepare_run(benchmark: SmithTask, items: Sequence[Item], model_dir: str, private: Path, workdir: Path) -> list[str]:
    """Writes the items and the config into ``private``; the arguments for OpenCompass's Python."""
    data_path = private / f"smith_{benchmark.folder.name.replace('-', '_')}.jsonl"
    write_items(items, data_path)
    cfg = benchmark.folder.config
    # OpenCompass's local runner asserts it has as many GPUs as a model asks for: none on a CPU machine
    gpus = int(cfg.get("opencompass_num_gpus", 1 if shutil.which("nvidia-smi") else 0))
    config_py = private / "autorl_config.py"
    config_py.write_text(
        config_source(
            dataset_meta(data_path.stem, data_path, cfg),
            model_dir,
            benchmark.config().max_new_tokens,
            int(cfg.get("batch_size", 16)),
            gpus,
        )
    )
    return ["-m", "opencompass.cli.main", str(config_py), "-w", str(workdir)]
