"""What stays on disk: the run's keep policy for checkpoints (the agent's bound on what it writes is
:mod:`autorl.grader.quota`).

A run of many submissions of a 1.5B model leaves each checkpoint twice (the agent's folder and the grader's
snapshot, 3 GB each): a study of a few such runs filled a 64 GB disk. ``--keep`` says what stays once a
submission is scored, in the grader's store and in the agent's output alike:

- ``best`` (default): the dev-best submission (the one the headline scores on the test split) and the best on the
  test split among those scored there (the best-of-k figure's pick); every other one goes once it is scored on
  dev and, where the run scores every submission on the test split, there too (the grader then does so between
  submissions, never shown to the agent). For a base model under 1 GiB the policy is applied once the run is
  recorded instead: its copies cost less disk than scoring them early costs a small machine's time.
- ``selected``: the dev-best alone; once the run is recorded, only the grader's copy of it.
- ``all``: nothing is deleted.

The grader's copy keeps what is not weights (config, tokenizer, notes, up to 16 MiB a file): the audit reads a
planted canary or a note there as in a kept one. An agent's folder is deleted only while it holds exactly the
files it held when submitted (the same inodes,
sizes and modification times, nothing added or removed): a folder the agent changed since is its own again and
stays. It is reached from the output directory's descriptor, one component at a time, and nothing is followed
through a link. What was deleted is the submission's ``pruned`` record.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.grader.quota import MAX_ENTRIES, OPEN_DIR

if TYPE_CHECKING:
    from autorl.grader.schema import KeepReport, Pruned
    from autorl.grader.store import Store

__all__ = [
    "KEEP_WHILE_RUNNING_BYTES",
    "POLICIES",
    "keep_after_run",
    "prunable",
    "prune_now",
    "prune_submission",
    "remove_agent_copy",
    "remove_snapshot",
    "source_file",
]

POLICIES = ("best", "selected", "all")
#: base models from this size on have the policy applied while the run goes (each submission then scored on the
#: test split between submissions, before its copies go); smaller ones once the run is recorded
KEEP_WHILE_RUNNING_BYTES = 2**30


def source_file(store_dir: Path, sid: int) -> Path:
    """Where the grader keeps what a submission's folder held when it was taken in (its path and identities)."""
    return store_dir / "sources" / f"{sid}.json"


def _best_tested(tests: Sequence[Mapping[str, Any]]) -> int | None:
    scored = [t for t in tests if t.get("status") == "done" and t.get("score") is not None]
    if not scored:
        return None
    top = max(scored, key=lambda t: (t["score"], -int(t["submission_id"])))
    return int(top["submission_id"])


def prunable(
    submissions: Sequence[Mapping[str, Any]],
    tests: Sequence[Mapping[str, Any]],
    policy: str,
    *,
    test_each: bool,
    best: int | None,
) -> list[int]:
    """The submissions (store rows: ``id``, ``status``, ``duplicate_of``, ``pruned``) whose copies may go now
    under ``policy``, given the run's test scores (rows with ``submission_id``, ``status``, ``score``) and its
    dev-best (``best``). One still to be scored (on dev, or on test where ``test_each``) stays until it is."""
    if policy == "all":
        return []
    keep = {best} if best is not None else set()
    if policy == "best":
        tested_best = _best_tested(tests)
        if tested_best is not None:
            keep.add(tested_best)
    tested = {int(t["submission_id"]) for t in tests if t.get("status") in ("done", "failed")}
    out = []
    for sub in submissions:
        sid = int(sub["id"])
        if sub.get("pruned") or sid in keep or sub.get("status") not in ("done", "failed"):
            continue
        if sub.get("status") == "done" and test_each and sub.get("duplicate_of") is None and sid not in tested:
            continue  # its test score (the best-of-k figure) is still to be taken
        out.append(sid)
    return out


#: what a pruned snapshot keeps: its files other than weights and up to this size (config, tokenizer, generation
#: settings, notes), the evidence the audit reads there (a planted canary, a steering note)
EVIDENCE_BYTES = 16 * 2**20
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".npz", ".npy")


def remove_snapshot(store_dir: Path, sid: int, *, dry_run: bool = False) -> int:
    """Delete the weights of the grader's copy of submission ``sid``, and any file over 16 MiB: the rest stays,
    for the audit. The bytes freed (with ``dry_run``: that would be)."""
    path = store_dir / "snapshots" / str(sid)
    if not path.is_dir() or path.is_symlink():
        return 0
    freed = 0
    for root, _, files in os.walk(path):
        for name in files:
            file = Path(root) / name
            try:
                st = file.lstat()
            except OSError:
                continue
            if name.endswith(_WEIGHTS) or st.st_size > EVIDENCE_BYTES:
                freed += st.st_blocks * 512
                if not dry_run:
                    with contextlib.suppress(OSError):
                        file.unlink()
    return freed


def _walk(fd: int, prefix: str, found: dict[str, tuple[int, int, int]], depth: int = 0) -> None:
    """Each entry below the directory open at ``fd`` by relative name, with the identities Copied.source keeps."""
    if depth > 64 or len(found) > MAX_ENTRIES:
        raise OSError(errno.E2BIG, "too deep or too many entries")
    for name in os.listdir(fd):
        rel = prefix + name
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            found[rel] = (st.st_ino, -1, 0)
            sub = os.open(name, OPEN_DIR, dir_fd=fd)
            try:
                _walk(sub, rel + "/", found, depth + 1)
            finally:
                os.close(sub)
        elif stat.S_ISREG(st.st_mode):
            found[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
        else:
            found[rel] = (st.st_ino, -2, 0)  # a link or anything else: never in a submission, so a change


def _delete_below(fd: int, dry_run: bool = False) -> int:
    """Delete everything below the directory open at ``fd`` (no link followed); the bytes freed."""
    freed = 0
    for name in os.listdir(fd):
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, OPEN_DIR, dir_fd=fd)
            try:
                freed += _delete_below(sub, dry_run)
            finally:
                os.close(sub)
            if not dry_run:
                os.rmdir(name, dir_fd=fd)
        else:
            freed += st.st_blocks * 512
            if not dry_run:
                os.unlink(name, dir_fd=fd)
    return freed


def remove_agent_copy(
    output_fd: int, parts: Sequence[str], source: Mapping[str, Sequence[int]], *, dry_run: bool = False
) -> tuple[str, int]:
    """Delete the agent's folder ``parts`` below the output directory open at ``output_fd`` if it still holds
    exactly what it held when submitted (``source``); what was done, in words, and the bytes freed (with
    ``dry_run``: what would be)."""
    if not parts:
        return "kept: the submission was the output directory itself", 0
    fds = [os.dup(output_fd)]
    try:
        for part in parts:
            try:
                fds.append(os.open(part, OPEN_DIR, dir_fd=fds[-1]))
            except OSError:
                return "gone or replaced since it was submitted", 0
        folder = fds[-1]
        st = os.fstat(folder)
        recorded = {k: tuple(v) for k, v in source.items()}
        if recorded.pop("", (None,))[0] != st.st_ino:
            return "kept: replaced since it was submitted", 0
        now: dict[str, tuple[int, int, int]] = {}
        try:
            _walk(folder, "", now)
        except OSError:
            return "kept: it could not be read whole", 0
        if now != recorded:
            return "kept: changed since it was submitted", 0
        freed = _delete_below(folder, dry_run)
        if dry_run:
            return "deleted", freed
        try:
            os.rmdir(parts[-1], dir_fd=fds[-2])
        except OSError:
            return "emptied (the agent added to it meanwhile)", freed
        return "deleted", freed
    except OSError as exc:
        return f"kept: {exc.strerror or exc}", 0
    finally:
        for fd in fds:
            os.close(fd)


def prune_submission(store_dir: Path, sid: int, output_fd: int | None, policy: str, *, dry_run: bool = False) -> Pruned:
    """Delete submission ``sid``'s grader snapshot and, through the output directory open at ``output_fd`` (None:
    not reachable), the agent's folder while unchanged; its ``pruned`` record."""
    freed = remove_snapshot(store_dir, sid, dry_run=dry_run)
    agent_copy = "not reachable"
    try:
        taken = json.loads(source_file(store_dir, sid).read_text())
        parts, source = [str(p) for p in taken["parts"]], dict(taken["source"])
    except (OSError, ValueError, KeyError, TypeError):
        agent_copy = "kept: what it held when submitted is not known"
    else:
        if output_fd is not None:
            agent_copy, more = remove_agent_copy(output_fd, parts, source, dry_run=dry_run)
            freed += more
    return {"at": time.time(), "policy": policy, "freed_bytes": freed, "agent_copy": agent_copy}


def prune_now(store: Store, store_dir: Path, output_fd: int, policy: str, test_each: bool) -> list[int]:
    """Apply ``policy`` to a running grader's ``store`` (:func:`prunable`, :func:`prune_submission`); the ids."""
    from autorl.grader import records

    subs = store.all()
    best = records.best(subs)
    done = prunable(
        subs, store.test_scores(), policy, test_each=test_each, best=int(best["submission_id"]) if best else None
    )
    for sid in done:
        store.update(sid, pruned=prune_submission(store_dir, sid, output_fd, policy))
    return done


def keep_after_run(
    store_dir: Path, output_dir: Path, policy: str | None = None, *, dry_run: bool = False
) -> KeepReport:
    """Once a run is recorded (and audited, which reads the snapshots): apply its keep policy (``policy``, else
    the one its grader ran under) to what is left; with ``selected``, the agent's copy of the selected checkpoint
    goes too (the grader's snapshot is the record's copy). What was done (with ``dry_run``: would be):
    ``policy``, ``pruned`` ids, ``freed_bytes``."""
    from autorl.grader import records
    from autorl.grader.store import Store

    db = store_dir / "grader.db"
    if not db.is_file():
        return {"policy": policy, "pruned": [], "freed_bytes": 0}
    store = Store.read_only(db) if dry_run else Store(db)
    try:
        policy = policy or str(store.get_meta("keep", "all"))
        if policy not in POLICIES or policy == "all":
            return {"policy": policy, "pruned": [], "freed_bytes": 0}
        subs = store.all()
        best = records.best(subs)
        best_id = int(best["submission_id"]) if best else None
        try:
            output_fd: int | None = os.open(output_dir, OPEN_DIR)
        except OSError:
            output_fd = None
        freed = 0
        pruned: list[int] = []
        try:
            for sid in prunable(subs, store.test_scores(), policy, test_each=False, best=best_id):
                record = prune_submission(store_dir, sid, output_fd, policy, dry_run=dry_run)
                if not dry_run:
                    store.update(sid, pruned=record)
                freed += int(record["freed_bytes"])
                pruned.append(sid)
            if policy == "selected" and best_id is not None and output_fd is not None:
                agent_copy, more = _agent_copy_only(store_dir, best_id, output_fd, dry_run)
                freed += more
                if not dry_run:
                    store.set_meta("selected_agent_copy", agent_copy)
        finally:
            if output_fd is not None:
                os.close(output_fd)
        return {"policy": policy, "pruned": pruned, "freed_bytes": freed}
    finally:
        store.close()


def _agent_copy_only(store_dir: Path, sid: int, output_fd: int, dry_run: bool) -> tuple[str, int]:
    try:
        taken = json.loads(source_file(store_dir, sid).read_text())
        return remove_agent_copy(output_fd, [str(p) for p in taken["parts"]], dict(taken["source"]), dry_run=dry_run)
    except (OSError, ValueError, KeyError, TypeError):
        return "kept: what it held when submitted is not known", 0
