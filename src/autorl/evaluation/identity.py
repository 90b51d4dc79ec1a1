"""What identifies a score: the eval-config hash and the model's content hash."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.evaluation.schema import EvalIdentity
    from autorl.inference.base import Backend

#: Bumped whenever this package changes how a score is computed from completions.
EVALUATION_VERSION = "1"


def stable_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def eval_config(
    benchmark: Benchmark, split: str, backend: Backend, hidden_dir: Path | None = None, limit: int | None = None
) -> EvalIdentity:
    """Everything that can move a score other than the model itself.

    With ``hidden_dir`` (the grader always passes it) the hash of the split's hidden items (ids and content) is
    part of it: items drawn with another secret, or read from another data version, never share a hash. A
    ``limit`` (only the first N items scored) is part of it too: scores on 20 items and on all of them are not
    one measurement (without a limit the config is what it was before limits counted, so those hashes stand).
    How the model got into the engine (a fresh engine, or weights swapped into a warm one) is not: the same
    weights get the same score either way, and the backend's ``identity()`` names no engine state.
    """
    config: EvalIdentity = {
        "benchmark": benchmark.name,
        "benchmark_version": benchmark.version,
        "split": split,
        "eval_config": benchmark.config().to_dict(),
        "backend": backend.identity(),
        "evaluation_version": EVALUATION_VERSION,
    }
    extra = benchmark.identity()
    if extra:  # only benchmarks that have such settings: other hashes stay what they were
        config["benchmark_identity"] = extra
    if hidden_dir is not None:
        config["hidden_items"] = benchmark.hidden_items_hash(split, hidden_dir)
    if limit is not None:
        config["limit"] = int(limit)
    return config


def config_hash(
    benchmark: Benchmark, split: str, backend: Backend, hidden_dir: Path | None = None, limit: int | None = None
) -> str:
    return stable_hash(eval_config(benchmark, split, backend, hidden_dir, limit))


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def tree_manifest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every regular file below ``root`` (symlinks followed), sorted.

    Linked directories are walked too (``Path.rglob`` skips them); a link to one of its own ancestors is not
    entered again, so a loop ends.
    """
    files: list[Path] = []
    stack: list[tuple[Path, frozenset[tuple[int, int]]]] = [(root, frozenset())]
    while stack:
        folder, ancestors = stack.pop()
        st = folder.stat()
        key = (st.st_dev, st.st_ino)
        if key in ancestors:
            continue
        inner = ancestors | {key}
        for entry in os.scandir(folder):
            path = Path(entry.path)
            if entry.is_dir():
                stack.append((path, inner))
            elif entry.is_file():
                files.append(path)
    files.sort(key=lambda p: p.relative_to(root).as_posix())
    return {p.relative_to(root).as_posix(): file_sha256(p) for p in files}


def manifest_hash(manifest: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()


def model_hash(root: Path) -> str:
    """Content hash of a model directory: the same bytes give the same hash wherever they live."""
    return manifest_hash(tree_manifest(root))
