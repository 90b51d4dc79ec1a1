"""The verifier of an exported Harbor task: the agent's final checkpoint scored the way autorl's grader scores it.

It runs in Harbor's *separate* verifier environment (``tests/test.sh``: ``python -m autorl.export.verifier
/tests/verifier.json --output-dir /app/output --logs-dir /logs/verifier``), a fresh container built from the
task's ``tests/`` folder, the only place the hidden items are. What crosses from the agent's environment is one
artifact, the agent's final checkpoint (``$OUTPUT_DIR/final``), and it is hostile input: it is taken by
descriptor through the grader's intake (no link followed, regular files only, limits, the pickle and remote-code
checks, validation of the copy), then evaluated by the grader's own evaluation slot (a worker process, replaced
if it crashes or hangs) on the hidden *test* split, beside the base model on the same items, and compared with
:func:`autorl.grader.records.compare` (the paired test of :mod:`autorl.evaluation.stats`).

Nothing the agent wrote is read as a score: Harbor empties ``/logs/verifier`` before the verifier runs, and this
module writes ``reward.json`` itself, after the evaluation, with numbers only (Harbor's format): ``reward``,
``test_score``, ``baseline``, ``improvement``, its 95% interval ``improvement_ci95_low``/``_high``, ``p_value``,
``n`` and ``checkpoint_valid``. ``autorl_result.json`` beside it keeps the full records. A failure that is not the
agent's (the baseline cannot be evaluated, the hidden items are not the exported ones) writes no reward: Harbor
then records a verifier error rather than a score.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import AutorlError
from autorl.grader.config import GraderConfig
from autorl.grader.intake import take_in
from autorl.grader.jobs import EvalFailed, EvalSlot
from autorl.grader.records import compare
from autorl.grader.snapshot import PinnedDir, Snapshot
from autorl.grader.validation import Limits, refusal_kind
from autorl.hidden import HIDDEN_SECRET_ENV
from autorl.jsonio import write_json_atomic
from autorl.resources import private_dir

if TYPE_CHECKING:
    from autorl.grader.schema import Comparison, EvalRecord

SPEC_FILE = "verifier.json"
REWARD_FILE = "reward.json"
DETAIL_FILE = "autorl_result.json"
#: what ``reward`` is: 1 when the improvement's 95% interval lies above 0 (else 0), or the test score in [0, 1]
REWARDS = ("beat-baseline", "score")


class VerifierError(AutorlError):
    """The verification itself failed (not the agent's checkpoint): no reward is written."""


@dataclass(frozen=True)
class VerifierSpec:
    """``tests/verifier.json``: what the exporter fixed for the verifier (paths relative to that file)."""

    task: str
    base_model_name: str
    hidden_items: str
    split: str = "test"
    backend: str = "hf"
    reward: str = "beat-baseline"
    base_model: str = "model"
    hidden_dir: str = "hidden"
    final_checkpoint: str = "final"
    limit: int | None = None
    eval_timeout: float = 3600.0
    max_bytes: int = 64 * 2**30
    max_files: int = 2000
    backend_options: dict[str, Any] = field(default_factory=dict)
    benchmark_options: dict[str, Any] = field(default_factory=dict)
    autorl_version: str = ""

    def save(self, path: Path) -> None:
        write_json_atomic(path, asdict(self), mode=0o644)

    @classmethod
    def load(cls, path: Path) -> VerifierSpec:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise VerifierError(f"cannot read the verifier's spec {path}: {exc}") from None
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__} if isinstance(data, dict) else {}
        try:
            return cls(**known)
        except TypeError as exc:
            raise VerifierError(f"{path} is not a verifier spec: {exc}") from None


def _take(spec: VerifierSpec, output_dir: Path, store: Path) -> tuple[Snapshot | None, dict[str, Any]]:
    """The agent's final checkpoint through the grader's intake: the snapshot, or ``None`` and why not."""
    try:
        pinned = PinnedDir(output_dir)
    except OSError:
        return None, {
            "refused": f"there is no output directory {output_dir}: the agent left no final checkpoint",
            "kind": "missing",
        }
    incoming = store / "incoming"
    try:
        digest, checkpoint, _, _ = take_in(
            str(output_dir / spec.final_checkpoint),
            output=pinned,
            workspace=output_dir.parent,
            incoming=incoming,
            limits=Limits(max_bytes=spec.max_bytes, max_files=spec.max_files),
        )
    except AutorlError as exc:
        return None, {"refused": str(exc), "kind": refusal_kind(exc)}
    finally:
        pinned.close()
    return Snapshot(incoming, checkpoint.kind, digest), {
        "kind": checkpoint.kind,
        "content_hash": digest,
        "files": len(checkpoint.files),
        "bytes": checkpoint.total_bytes,
    }


def _check_items(spec: VerifierSpec, record: EvalRecord, what: str) -> None:
    found = (record.get("config") or {}).get("hidden_items")
    if found != spec.hidden_items:
        raise VerifierError(
            f"the {what} was evaluated on test items {found!r}, not the exported ones "
            f"({spec.hidden_items}): the task's hidden folder is not the one it was exported with"
        )


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def rewards(
    spec: VerifierSpec, baseline: EvalRecord, candidate: EvalRecord | None, comparison: Comparison | None
) -> dict[str, float]:
    """``reward.json``: numbers only. Without a scored checkpoint ``reward`` is 0 and there is no test score."""
    out: dict[str, float] = {
        "baseline": float(baseline["score"]),
        "n": float(baseline["n"]),
        "checkpoint_valid": 0.0 if candidate is None else 1.0,
    }
    beat = False
    if candidate is not None:
        out["test_score"] = float(candidate["score"])
        if comparison is not None:
            lo, hi = comparison["ci95"]
            out.update(
                improvement=float(comparison["difference"]),
                improvement_ci95_low=float(lo),
                improvement_ci95_high=float(hi),
                p_value=float(comparison["p_value"]),
            )
            beat = float(lo) > 0.0
    if spec.reward == "score":
        out["reward"] = out.get("test_score", 0.0) / 100.0
    else:
        out["reward"] = 1.0 if beat else 0.0
    return {k: v for k, v in out.items() if _finite(v) is not None}


def verify(spec_path: Path, output_dir: Path, logs_dir: Path) -> dict[str, float]:
    """Score the final checkpoint in ``output_dir``; write ``reward.json`` and ``autorl_result.json`` into
    ``logs_dir`` and return the rewards. :class:`VerifierError` when the verification itself fails."""
    # an operator's secret would redraw the hidden items: the exported ones are drawn with the folder's own
    os.environ.pop(HIDDEN_SECRET_ENV, None)
    spec = VerifierSpec.load(spec_path)
    if spec.reward not in REWARDS:
        raise VerifierError(f"{spec_path}: reward must be one of {', '.join(REWARDS)}, not {spec.reward!r}")
    root = spec_path.parent
    logs_dir.mkdir(parents=True, exist_ok=True)
    for stale in (REWARD_FILE, "reward.txt", DETAIL_FILE):  # Harbor clears them too; a link is removed, not followed
        (logs_dir / stale).unlink(missing_ok=True)
    detail: dict[str, Any] = {
        "task": spec.task,
        "base_model": spec.base_model_name,
        "split": spec.split,
        "backend": spec.backend,
        "hidden_items": spec.hidden_items,
        "autorl_version": spec.autorl_version,
    }
    with tempfile.TemporaryDirectory(prefix="autorl-verifier-") as tmp:
        store = private_dir(Path(tmp) / "store")
        config = GraderConfig(
            task=spec.task,
            workspace=str(output_dir.parent),
            output_dir=str(output_dir),
            store_dir=str(store),
            hidden_dir=str(root / spec.hidden_dir),
            base_model=str(root / spec.base_model),
            base_model_name=spec.base_model_name,
            backend=spec.backend,
            backend_options=spec.backend_options,
            benchmark_options=spec.benchmark_options,
            eval_timeout=spec.eval_timeout,
            max_bytes=spec.max_bytes,
            max_files=spec.max_files,
            limit=spec.limit,
        )
        slot = EvalSlot(config, store, env={"AUTORL_HOME": str(private_dir(Path(tmp) / "home"))})
        try:
            try:
                baseline = slot.run(None, spec.split, "baseline")
            except EvalFailed as exc:
                raise VerifierError(f"the base model could not be evaluated: {exc}") from None
            _check_items(spec, baseline, "base model")
            snapshot, detail["checkpoint"] = _take(spec, output_dir, store)
            candidate = None
            if snapshot is not None:
                try:
                    candidate = slot.run(snapshot, spec.split, "final")
                except EvalFailed as exc:
                    detail["checkpoint"]["evaluation_error"] = str(exc)
                else:
                    _check_items(spec, candidate, "final checkpoint")
        finally:
            slot.close()
    comparison = compare(baseline, candidate)
    reward = rewards(spec, baseline, candidate, comparison)
    detail.update(
        reward=spec.reward,
        rewards=reward,
        comparison=comparison,
        baseline_record={k: v for k, v in baseline.items() if k != "item_scores"},
        final_record={k: v for k, v in candidate.items() if k != "item_scores"} if candidate else None,
    )
    write_json_atomic(logs_dir / DETAIL_FILE, detail, mode=0o644)
    write_json_atomic(logs_dir / REWARD_FILE, reward, mode=0o644)
    return reward


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autorl.export.verifier",
        description="Score an exported task's final checkpoint on its hidden test split.",
    )
    parser.add_argument("spec", type=Path, help=f"the task's tests/{SPEC_FILE}")
    parser.add_argument("--output-dir", type=Path, required=True, help="the agent's OUTPUT_DIR as collected")
    parser.add_argument("--logs-dir", type=Path, required=True, help="where Harbor reads reward.json")
    args = parser.parse_args(argv)
    try:
        reward = verify(args.spec, args.output_dir, args.logs_dir)
    except AutorlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(reward, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
