"""Grader-owned copies of submissions, so later edits by the agent change nothing.

Files are copied, not hard-linked: a hard link shares the inode, and an in-place write by the agent
would change the "snapshot" too. Each snapshot has a sha256 manifest; its hash identifies the content.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from autorl.evaluation.identity import manifest_hash
from autorl.grader.validation import Checkpoint


def _copy_and_hash(src: Path, dst: Path) -> str:
    h = hashlib.sha256()
    with src.open("rb") as fin, dst.open("wb") as fout:
        while block := fin.read(1 << 22):
            h.update(block)
            fout.write(block)
        fout.flush()
        os.fsync(fout.fileno())
    os.chmod(dst, 0o400)
    return h.hexdigest()


def take_snapshot(checkpoint: Checkpoint, target: Path) -> tuple[Path, str]:
    """Copy ``checkpoint`` into ``target``; returns (path, content hash)."""
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    manifest: dict[str, str] = {}
    for src in checkpoint.files:
        rel = src.relative_to(checkpoint.path)
        dst = tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        manifest[rel.as_posix()] = _copy_and_hash(src.resolve(), dst)
    digest = manifest_hash(manifest)
    (tmp / ".autorl_manifest.json").write_text(json.dumps({"sha256": manifest, "hash": digest}, indent=1))
    if target.exists():
        shutil.rmtree(target)
    tmp.replace(target)
    return target, digest
