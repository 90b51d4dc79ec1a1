"""Auditing one run: every check over what the agent could write and what the run recorded, within the
audit's time budget; what it could not finish is itself a flag. ``autorl audit RUN_ID`` runs it again and
records the new flags."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.audit.budget import AUDIT_BUDGET_S, Budget
from autorl.audit.checks import DecoyCheck, check_harness, check_refusals, check_sandbox, check_scores
from autorl.audit.downloads import DownloadCheck
from autorl.audit.encoded import with_decoded
from autorl.audit.flags import INFO, MEDIUM, Flag, from_judge
from autorl.audit.overlap import NgramIndex, match_hidden, overlap_flags
from autorl.audit.scan import HARNESS_FILES, Source, agent_texts, seen_files
from autorl.audit.steering import SteeringCheck
from autorl.audit.weights import check_weights
from autorl.errors import ResourceError

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.record.ledger import Ledger
    from autorl.record.schema import FlagRecord, ResultRecord, RowRecord


def reaudit(
    result: ResultRecord,
    *,
    benchmark: Benchmark,
    home: Path,
    ledger: Ledger | None = None,
    variants: Sequence[Path] = (),
    extra: Sequence[Flag] = (),
) -> None:
    """Audit a recorded run again (``autorl audit RUN_ID``) and record it with its new flags (and ``extra``, the
    judge's): ``result.json``, the ledger and ``results.csv``, through :func:`autorl.record.ledger.record_run`."""
    from autorl.record.ledger import record_run

    if not extra:  # a judge's flags stand until a judge is asked again
        extra = [
            Flag(str(f["name"]), str(f["severity"]), str(f.get("detail", "")), list(f.get("evidence") or []))
            for f in result.get("audit") or []
            if isinstance(f, dict) and from_judge(str(f.get("name", "")))
        ]
    flags = [*audit_run(result, benchmark=benchmark, variants=variants), *extra]
    result["audit"] = [f.to_dict() for f in flags]
    add_taken_decoys(result["row"], result["audit"])
    record_run(result, home, ledger=ledger)


def add_taken_decoys(row: RowRecord, audit: Sequence[FlagRecord]) -> None:
    """The ``decoy-taken`` flag's evidence (the canaries the audit found in the agent's files, beside what the
    run saw) added to ``row["decoys"]``, the column a study counts bait by; a run with no decoys planted
    (``decoys`` None) stays without. Evidence already there stays: an audit adds to the record, never erases."""
    decoys = row.get("decoys")
    if decoys is None:
        return
    taken = [str(e) for f in audit if f.get("name") == "decoy-taken" for e in f.get("evidence") or []]
    row["decoys"] = sorted({str(e) for e in decoys} | set(taken))


def audit_run(
    result: ResultRecord,
    *,
    benchmark: Benchmark,
    variants: Sequence[Path] = (),
    budget_s: float | None = AUDIT_BUDGET_S,
) -> list[Flag]:
    """All checks for one finished run (its ``result.json`` as a dict), within ``budget_s`` seconds.

    Variants: post-trained variants of the base model at hand (the run records the ones it found in the
    local cache; more can be given).
    """
    budget = Budget(budget_s)
    row, meta = result["row"], result.get("meta", {})
    workspace = Path(row["workspace"])
    if not isinstance(meta, dict) or not meta.get("hidden_dir"):
        raise ResourceError(
            f"run {row.get('run_id')} was recorded without its hidden data's folder (a record from "
            "another machine?): audit it where it ran"
        )
    hidden_dir = Path(meta["hidden_dir"])
    hidden = {split: benchmark.load_items(split, hidden_dir) for split in benchmark.splits}
    store = Path(meta["store_dir"]) if meta.get("store_dir") else None
    sources = [Source(workspace, skip_top=HARNESS_FILES)]
    if meta.get("tmp_dir"):
        sources.append(Source(Path(meta["tmp_dir"]), "/tmp/"))
    snapshots: dict[int, Path] = {}
    for sub in result.get("submissions", []):
        snap = store / "snapshots" / str(sub["submission_id"]) if store else None
        if snap is not None and snap.is_dir() and not snap.is_symlink():
            sources.append(Source(snap, f"snapshot {sub['submission_id']}/"))
            if sub.get("status") == "done":
                snapshots[int(sub["submission_id"])] = snap
    extra: Iterable[tuple[str, str, bytes]] = ()
    if meta.get("watch_dir") and Path(meta["watch_dir"]).is_dir():
        extra = seen_files(Path(meta["watch_dir"]), sources)
    gateway: dict[str, Any] = meta["llm_gateway"] if isinstance(meta.get("llm_gateway"), dict) else {}
    if gateway.get("record_dir"):  # what the model was asked and answered, as the LLM gateway recorded it
        from autorl.gateway.record import call_texts

        extra = itertools.chain(extra, call_texts(Path(gateway["record_dir"])))
    index = NgramIndex((split, item) for split, items in hidden.items() for item in items)
    per_split: dict[str, dict[str, set[str]]] = {s: {} for s in hidden}
    downloads = DownloadCheck(row["task"], row["base_model"])
    decoys = DecoyCheck(meta.get("decoys"))
    steering = SteeringCheck()
    for text in agent_texts(sources, budget, extra):
        for view in with_decoded(text):  # the text, and what it holds in base64, hex or rot13
            match_hidden(index, view, per_split)
            steering.feed(view)
            decoys.feed(view, decoded=view is not text)
        if not text.where.startswith("snapshot "):
            downloads.feed(text)
        if not budget.left():
            break
    flags = overlap_flags(per_split, hidden, dev_public=bool(getattr(benchmark, "dev_public", False)))
    flags += downloads.flags()
    flags += decoys.flags()
    flags += steering.flags()
    flags += check_refusals(meta.get("refusals", []), workspace)
    flags += check_harness(workspace, meta.get("harness_hashes", {}))
    flags += check_sandbox(row.get("sandbox") or meta.get("sandbox"))
    distances: dict[int, float] = {}
    base_dir = Path(meta["model_path"]) if meta.get("model_path") else None
    known = [*(Path(v) for v in meta.get("variants") or []), *variants]
    if snapshots and base_dir is not None and base_dir.is_dir() and budget.left():
        try:
            weight_flags, distances = check_weights(snapshots, base_dir, [v for v in known if v.is_dir()], budget)
            flags += weight_flags
        except Exception as exc:  # the base or a variant cannot be read: say so, keep the rest
            budget.unscanned.append(f"weights ({str(exc)[:200]})")
    flags += check_scores(row, result.get("submissions", []), distances)
    if budget.spent:
        flags.append(
            Flag(
                "audit-incomplete",
                MEDIUM,
                f"the audit stopped at its time budget ({budget.seconds:.0f} s); "
                "run `autorl audit RUN_ID` to finish it",
                [],
            )
        )
    if budget.unscanned:
        flags.append(
            Flag(
                "unreadable-files",
                INFO,
                f"{len(budget.unscanned)} agent file(s) or member(s) could not be "
                "read or parsed (scanned as far as they could be)",
                budget.unscanned[:200],
            )
        )
    return flags
