"""``autorl export harbor``: an autorl task as a Harbor task directory whose verifier the agent cannot forge.

One task directory per cell (:mod:`autorl.export.harbor_cells`), in the task format of the ``harbor`` package
(``task.toml`` schema 1.4)::

    <name>/task.toml            agent and verifier timeouts, the agent's user, the one artifact, separate verifier
    <name>/instruction.md       the benchmark's description and autorl's workspace instructions (the same code as
                                ``autorl run``; no grading server, so the final checkpoint is left in one folder)
    <name>/environment/         the agent's image: the base model, the training data, the training stack
    <name>/tests/               the verifier's image: autorl, the hidden items, the base model, ``verifier.json``

The hidden items are drawn anew for every export with a fresh secret (never the installation's), so that a task
directory that is shared or published gives away nothing of the installation's own hidden items; they are
written only under ``tests/``, which Harbor builds into the verifier's separate environment and never into the
agent's. The training data is prepared with the same fresh secret, so whatever a benchmark leaves out of the
training data because it is hidden (GSM8K's dev slice) is left out here too. The verifier
(:mod:`autorl.export.verifier`) scores only the final checkpoint Harbor carries across.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import string
import tempfile
from collections.abc import Callable, Iterator, Mapping
from importlib import resources as package_files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import ResourceError, UsageError
from autorl.export.harbor_cells import NETWORKS, Scoring, TaskCell, check
from autorl.export.packages import Wheels, constraints, training_requirements
from autorl.export.verifier import SPEC_FILE, VerifierSpec
from autorl.hidden import HIDDEN_SECRET_ENV
from autorl.version import __version__

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.resources import ResolvedModel

WORKSPACE = "/app"
OUTPUT_DIR = f"{WORKSPACE}/output"
FINAL = "final"
#: what the backend needs installed beside autorl in the verifier's image
BACKEND_EXTRAS = {"hf": ("hf",), "vllm": ("hf", "vllm")}


def _render(template: str, **values: Any) -> str:
    text = package_files.files("autorl").joinpath("templates", "harbor", f"{template}.tmpl").read_text()
    return string.Template(text).substitute({k: str(v) for k, v in values.items()})


def _toml(value: Any) -> str:
    """A TOML value: a basic string (control characters escaped), a number, a boolean, or an array of them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    text = json.dumps(str(value), ensure_ascii=False)
    return text.replace("\x7f", "\\u007f")


def _docker_env(values: Mapping[str, str]) -> str:
    def quoted(v: str) -> str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'

    return " \\\n    ".join(f"{k}={quoted(v)}" for k, v in values.items())


@contextlib.contextmanager
def _fresh_secret() -> Iterator[bytes]:
    """A new secret in force (``AUTORL_HIDDEN_SECRET``) while the task's data is prepared, the caller's back after."""
    secret = secrets.token_bytes(32)
    before = os.environ.get(HIDDEN_SECRET_ENV)
    os.environ[HIDDEN_SECRET_ENV] = secret.hex()
    try:
        yield secret
    finally:
        if before is None:
            os.environ.pop(HIDDEN_SECRET_ENV, None)
        else:
            os.environ[HIDDEN_SECRET_ENV] = before


def _copy_tree(source: Path, target: Path) -> None:
    """A copy with links resolved (a hub cache links into its blobs), regular files and folders only."""
    shutil.copytree(source, target, symlinks=False, ignore=shutil.ignore_patterns(".*.lock", "__pycache__"))


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _prepare(stage: Path, cell: TaskCell, benchmark: Benchmark, split: str, log: Callable[[str], None]) -> str:
    """The hidden items (into ``tests/``) and the training data (into the agent's workspace), drawn with a fresh
    secret that the hidden folder keeps; the hash of ``split``'s items."""
    from autorl.resources import prepare_data

    with tempfile.TemporaryDirectory(prefix="autorl-export-") as tmp, _fresh_secret() as secret:
        log(f"{cell.name}: preparing {cell.task}'s data with a new secret")
        data = prepare_data(benchmark, home=Path(tmp))
        digest = benchmark.hidden_items_hash(split, data.hidden_dir)
        _copy_tree(data.hidden_dir, stage / "tests" / "hidden")
        _copy_tree(data.train_dir, stage / "environment" / "workspace" / "data")
    # the folder's own secret, so that the verifier (where no operator's secret is in force) keeps its items
    secret_file = stage / "tests" / "hidden" / "secret"
    secret_file.write_bytes(secret)
    secret_file.chmod(0o600)
    return digest


def _agent_image(env: Path, cell: TaskCell, benchmark: Benchmark, model: ResolvedModel, scoring: Scoring) -> str:
    """``environment/``: the workspace (base model, training data, the benchmark's exposed files, description and
    instructions) and the Dockerfile that puts it at /app; the instruction text."""
    from autorl.runs.workspace import instructions

    workspace = env / "workspace"
    _copy_tree(model.path, workspace / "models" / model.name)
    for name, source in benchmark.exposed_files().items():
        if "/" in name or name.startswith("."):
            raise UsageError(f"benchmark {cell.task} exposes an invalid file name {name!r}")
        (_copy_tree if Path(source).is_dir() else shutil.copy)(Path(source), workspace / name)
    text = instructions(benchmark, model.name, cell.timeout, "", final_checkpoint=f"$OUTPUT_DIR/{FINAL}")
    description = benchmark.description().strip() + "\n"
    _write(workspace / "description.md", description)
    _write(workspace / "instructions.md", text)
    _write(env / "requirements.txt", training_requirements())
    contract = {
        "TASK": cell.task,
        "BASE_MODEL": model.name,
        "WORKSPACE": WORKSPACE,
        "MODEL_PATH": f"{WORKSPACE}/models/{model.name}",
        "DATA_PATH": f"{WORKSPACE}/data",
        "OUTPUT_DIR": OUTPUT_DIR,
    }
    _write(env / "Dockerfile", _render("environment.Dockerfile", image=scoring.image, env=_docker_env(contract)))
    return description + "\n" + text


def _verifier_image(
    tests: Path, cell: TaskCell, model: ResolvedModel, spec: VerifierSpec, scoring: Scoring, wheels: Wheels
) -> None:
    """``tests/``: the base model, the verifier's spec and script, and what its image installs."""
    from autorl.plugins.registry import get_backends, get_benchmarks

    _copy_tree(model.path, tests / spec.base_model)
    dists: dict[str, tuple[str, ...]] = {"autorl": BACKEND_EXTRAS.get(cell.backend, ())}
    for dist in (get_benchmarks()[cell.task].distribution, get_backends()[cell.backend].distribution):
        dists.setdefault(dist, ())
    lines = []
    for dist, extras in dists.items():
        line, wheel = wheels.requirement(dist, extras)
        lines.append(line)
        if wheel is not None:
            (tests / "wheels").mkdir(exist_ok=True)
            shutil.copy2(wheel, tests / "wheels" / wheel.name)
    _write(tests / "requirements.txt", "\n".join(lines) + "\n")
    _write(tests / "constraints.txt", constraints(dists))
    spec.save(tests / SPEC_FILE)
    _write(tests / "test.sh", _render("test.sh", output_dir=OUTPUT_DIR), 0o755)
    _write(tests / "Dockerfile", _render("verifier.Dockerfile", image=scoring.image, final=f"{OUTPUT_DIR}/{FINAL}"))


def _task_toml(cell: TaskCell, scoring: Scoring, benchmark: Benchmark, spec: VerifierSpec) -> str:
    verifier_gpus = scoring.verifier_gpus if scoring.verifier_gpus is not None else min(cell.gpus, 1)
    metadata = {
        "autorl_version": __version__,
        "benchmark": cell.task,
        "benchmark_version": benchmark.version,
        "base_model": cell.model,
        "backend": cell.backend,
        "split": spec.split,
        "reward": scoring.reward,
        "hidden_items": spec.hidden_items,
        **({"limit": cell.limit} if cell.limit else {}),
        **({"benchmark_options": json.dumps(cell.benchmark_options, sort_keys=True)} if cell.benchmark_options else {}),
    }
    meaning = (
        "1 when the improvement's 95% interval lies above 0, else 0."
        if scoring.reward == "beat-baseline"
        else "the test score as a fraction."
    )
    return _render(
        "task.toml",
        autorl_version=__version__,
        base_model=cell.model,
        benchmark=cell.task,
        final=f"$OUTPUT_DIR/{FINAL}",
        reward_meaning=meaning,
        artifact=_toml(f"{OUTPUT_DIR}/{FINAL}"),
        name=_toml(f"autorl/{cell.name}"),
        description=_toml(f"Post-train {cell.model} past its baseline on {cell.task} within {cell.timeout:g} s"),
        benchmark_keyword=_toml(cell.task),
        metadata="\n".join(f"{k} = {_toml(v)}" for k, v in metadata.items()),
        verifier_timeout=_toml(float(scoring.verifier_timeout)),
        build_timeout=_toml(float(scoring.build_timeout)),
        verifier_gpus=verifier_gpus,
        timeout=_toml(float(cell.timeout)),
        network=_toml(NETWORKS[cell.network]),
        gpus=cell.gpus,
    )


def _write_task(stage: Path, cell: TaskCell, scoring: Scoring, wheels: Wheels, log: Callable[[str], None]) -> None:
    from autorl.plugins.registry import get_benchmark
    from autorl.resources import resolve_model

    benchmark = get_benchmark(cell.task)(cell.benchmark_options)
    model = resolve_model(cell.model)
    split = "test" if "test" in benchmark.splits else benchmark.splits[-1]
    digest = _prepare(stage, cell, benchmark, split, log)
    log(f"{cell.name}: copying the base model {cell.model}")
    _write(stage / "instruction.md", _agent_image(stage / "environment", cell, benchmark, model, scoring))
    spec = VerifierSpec(
        task=cell.task,
        base_model_name=model.name,
        hidden_items=digest,
        split=split,
        backend=cell.backend,
        reward=scoring.reward,
        final_checkpoint=FINAL,
        limit=cell.limit,
        # two evaluations within Harbor's limit: one that runs over fails (the checkpoint's: reward
        # 0; the base model's: a verifier error) before Harbor kills the verifier unheard
        eval_timeout=scoring.verifier_timeout / 2,
        benchmark_options=dict(cell.benchmark_options),
        autorl_version=__version__,
    )
    _verifier_image(stage / "tests", cell, model, spec, scoring, wheels)
    _write(stage / "task.toml", _task_toml(cell, scoring, benchmark, spec))


def export(
    out: Path, cells: list[TaskCell], scoring: Scoring, *, log: Callable[[str], None] = lambda _: None
) -> list[Path]:
    """Write one Harbor task directory per cell under ``out`` (created if needed); their paths.

    Each is built beside its final place and renamed into it, so a failure leaves no half-written task. An
    existing task directory is never replaced.
    """
    for cell in cells:
        check(cell, scoring)
    names: dict[str, TaskCell] = {}
    for cell in cells:
        name = cell.name if sum(c.name == cell.name for c in cells) == 1 else f"{cell.name}-{cell.key}"
        names[name] = cell
    out = Path(out).expanduser()
    for name in names:
        if (out / name).exists():
            raise UsageError(f"{out / name} already exists; remove it or export into another --out")
    out.mkdir(parents=True, exist_ok=True)
    done: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="autorl-wheels-") as wheel_dir:
        wheels = Wheels(Path(wheel_dir))
        for name, cell in names.items():
            stage = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out))
            try:
                _write_task(stage, cell, scoring, wheels, log)
                stage.chmod(0o755)
                stage.rename(out / name)
            except OSError as exc:
                shutil.rmtree(stage, ignore_errors=True)
                raise ResourceError(f"could not write {out / name}: {exc.strerror or exc}") from None
            except BaseException:
                shutil.rmtree(stage, ignore_errors=True)
                raise
            log(f"{name}: written to {out / name}")
            done.append(out / name)
    return done
