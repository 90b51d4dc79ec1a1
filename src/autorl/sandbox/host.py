"""The host's places the orchestrator names to the sandbox (:class:`~autorl.sandbox.SandboxSpec`): caches and
folders to mask, folders to show read-only, and what a model brings along."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def model_bind_paths(model_path: Path) -> list[Path]:
    """The model as given and resolved; a Hugging Face cache snapshot brings its repo (blobs) along."""
    real = model_path.resolve()
    paths = [real]
    parts = real.parts
    if "snapshots" in parts:
        repo = Path(*parts[: parts.index("snapshots")])
        if repo.name.startswith(("models--", "datasets--")):
            paths.append(repo)
    return paths


def extra_read_only(environ: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if environ is None else environ
    return [Path(p).expanduser() for p in env.get("AUTORL_SANDBOX_RO", "").split(os.pathsep) if p]


def extra_hidden(environ: Mapping[str, str] | None = None) -> list[Path]:
    """More folders to mask, named by the orchestrator's ``AUTORL_SANDBOX_HIDE`` (``os.pathsep``-separated): a
    study's worker names its shared autorl home and the study folder, whose models and data a run reaches
    through links (its read-only binds re-expose just those after the masking)."""
    env = os.environ if environ is None else environ
    return [Path(p).expanduser() for p in env.get("AUTORL_SANDBOX_HIDE", "").split(os.pathsep) if p]


def hf_cache_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The Hugging Face caches (hub, datasets) named by the environment or at their default place."""
    env = os.environ if environ is None else environ
    dirs = [Path(env[k]) for k in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE",
                                   "HF_DATASETS_CACHE") if env.get(k)]
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dirs.append(cache / "huggingface")
    return dirs
