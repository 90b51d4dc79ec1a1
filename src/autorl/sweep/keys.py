"""Run keys: a hash of the canonical JSON of everything that changes a cell's result.

The identity holds the agent (its name and a hash of its class's distribution or of its folder's files), the task
(name, version and a hash of its eval config and options), the model (its id and its revision or the hash of its
files' content), the seed, the timeout, the backend, the GPUs, the sandbox and network policy, the item limit,
whether the run is audited and its audit budget, the agent's extra variables, the LLM budgets and autorl's version. Changing any of them changes the key;
the order of the spec's keys does not (the JSON is canonical: sorted keys, no spaces).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from autorl.errors import AutorlError, UsageError
from autorl.sweep.records import AgentIdentity, CellIdentity, CellOptions, ModelIdentity, TaskIdentity
from autorl.sweep.spec import Cell

T = TypeVar("T")

#: files of a local model directory whose content (not only size) goes into its hash


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def run_key(identity: CellIdentity) -> str:
    return hashlib.sha256(canonical(identity).encode()).hexdigest()[:20]


def _folder_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0")
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    return h.hexdigest()[:16]


def _model_hash(folder: Path) -> str:
    """The content of every file (the grader's own model hash): new weights of the same size are another model.
    Hashed once per study and model (the resolver caches it)."""
    from autorl.evaluation.identity import model_hash

    return model_hash(folder)[:16]


def _version_of(module: str) -> str:
    from importlib import metadata

    top = module.split(".", 1)[0]
    try:
        dists = metadata.packages_distributions().get(top, [])
        return f"{dists[0]}=={metadata.version(dists[0])}" if dists else top
    except Exception:  # metadata of a broken install only loses precision in the key
        return top


class Resolver:
    """Resolves and identifies agents, tasks and models once per study (cached: a matrix repeats them)."""

    def __init__(self) -> None:
        self._agents: dict[str, AgentIdentity] = {}
        self._tasks: dict[str, TaskIdentity] = {}
        self._models: dict[str, ModelIdentity] = {}

    def agent(self, spec: str) -> AgentIdentity:
        def make() -> AgentIdentity:
            from autorl.plugins.registry import resolve_agent

            try:
                cls = resolve_agent(spec)
            except AutorlError as exc:
                raise UsageError(f"spec: agent {spec!r}: {exc}") from None
            folder = Path(spec).expanduser()
            if folder.is_dir():
                return {"name": cls.name, "folder": str(folder.resolve()), "hash": _folder_hash(folder)}
            return {
                "name": cls.name,
                "class": f"{cls.__module__}.{cls.__qualname__}",
                "hash": _version_of(cls.__module__),
            }

        return _cached(self._agents, spec, make)

    def task(self, name: str, options: dict[str, Any]) -> TaskIdentity:
        def make() -> TaskIdentity:
            from autorl.evaluation.identity import stable_hash
            from autorl.plugins.registry import get_benchmark, resolve_task

            try:
                bench = get_benchmark(resolve_task(name))(dict(options))
                config = {"eval_config": bench.config().to_dict(), "identity": bench.identity(), "options": options}
            except AutorlError as exc:
                raise UsageError(f"spec: task {name!r}: {exc}") from None
            return {
                "name": name,
                "version": str(bench.version),
                "eval_config_hash": stable_hash(config),
                "plugin": _version_of(type(bench).__module__),
            }

        return _cached(self._tasks, canonical([name, options]), make)

    def model(self, spec: str) -> ModelIdentity:
        def make() -> ModelIdentity:
            from autorl.resources import BUILTIN_MODELS

            if spec in BUILTIN_MODELS:  # its recipe's version, without building it here
                from autorl.builtin import tiny_model

                return {"id": spec, "revision": f"recipe-v{tiny_model.RECIPE_VERSION}"}
            local = Path(spec).expanduser()
            if local.is_dir():
                if not (local / "config.json").is_file() and not (local / "adapter_config.json").is_file():
                    raise UsageError(f"spec: model {spec!r} has no config.json: not a model directory")
                return {"id": str(local.resolve()), "hash": _model_hash(local)}
            repo, _, revision = spec.partition("@")
            if spec.startswith(("autorl:", ".", "/", "~")) or repo.count("/") != 1:
                raise UsageError(
                    f"spec: model {spec!r} is neither a local directory, a hub id (org/name[@revision]) "
                    "nor a built-in model (autorl:tiny)"
                )
            return {"id": repo, "revision": revision or "unpinned"}

        return _cached(self._models, spec, make)

    def identify(self, options: CellOptions) -> Cell:
        from autorl.version import __version__

        o = options
        identity: CellIdentity = {
            "agent": self.agent(o["agent"]),
            "task": self.task(o["task"], o["benchmark_options"]),
            "model": self.model(o["model"]),
            "seed": o["seed"],
            "timeout": o["timeout"],
            "backend": o["backend"] or "default",
            "gpus": {"count": o["gpus"], "grader": grader_gpus(o)},
            "sandbox": {"mode": o["sandbox"], "network": o["network"]},
            "limit": o["limit"],
            "audit": {"enabled": o["audit"], "budget_s": o["audit_budget"]},
            "agent_env": o["agent_env"],
            "llm_budget": {"usd": o["llm_budget_usd"], "tokens": o["llm_budget_tokens"]},
            "autorl_version": __version__,
        }
        if o.get("agent_credentials"):  # only when given: the keys of studies without them stay as they were
            identity["agent_credentials"] = o["agent_credentials"]
        judge = o.get("audit_judge")
        if judge:  # the same
            identity["audit_judge"] = {"model": judge, "samples": o["audit_judge_samples"]}
        if o.get("decoys") is False:  # only when off: the keys of studies with decoys stay as they were
            identity["decoys"] = False
        if o.get("test_all") is False:  # the same: only when the peer figure is turned off
            identity["test_all"] = False
        if o.get("off_target"):  # the same
            identity["off_target"] = o["off_target"]
        return Cell(options=o, run_key=run_key(identity), identity=identity)


def _cached(cache: dict[str, T], key: str, make: Callable[[], T]) -> T:
    """Resolved once per study (a matrix repeats its agents, tasks and models)."""
    if key not in cache:
        cache[key] = make()
    return cache[key]


def grader_gpus(options: CellOptions) -> int:
    """How many of a run's GPUs the grader gets: as given, else 1 of 2 or more, else it shares the agent's."""
    if options["grader_gpus"] is not None:
        return int(options["grader_gpus"])
    return 1 if options["gpus"] >= 2 else 0


def gpu_flag(options: CellOptions, devices: list[str]) -> str | None:
    """``autorl run --gpus`` for a run given ``devices``: the last ``grader_gpus`` for the grader, the rest for
    the agent; with no grader GPU of its own the grader shares the agent's last one."""
    if not devices:
        return None
    n_grader = grader_gpus(options)
    agent, grader = devices[: len(devices) - n_grader] or devices, devices[len(devices) - n_grader :]
    if not grader:
        grader = agent[-1:]
    return f"agent={','.join(agent)},grader={','.join(grader)}"


def environ_devices(env: dict[str, str] | None = None) -> list[str]:
    """The GPUs an engine gave this process (``CUDA_VISIBLE_DEVICES``)."""
    raw = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES", "")
    return [d.strip() for d in raw.split(",") if d.strip() and d.strip() != "-1"]
