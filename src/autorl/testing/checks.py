"""The contract checks of :mod:`autorl.testing`, plain functions a plugin author calls from a test: a benchmark
run end to end through ``autorl eval``, the hidden-items contract (secrets, reproduction, idempotence), training
data and an agent's view that hold no hidden item, claims of success that score 0 in an interactive benchmark
(played by :class:`PolicyBackend`), every hardening check, and a plugin that ``autorl plugins`` lists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autorl.inference.base import Backend, Completion, GenerationRequest

__all__ = [
    "PolicyBackend",
    "assert_plugin_discovered",
    "check_agent_view",
    "check_benchmark_end_to_end",
    "check_claims_score_zero",
    "check_hardening",
    "check_hidden_items_secret",
    "check_train_data_holds_no_hidden_item",
    "prepare_as_a_run",
]


def check_benchmark_end_to_end(
    task: str, model: str = "autorl:tiny", limit: int = 3, backend: str = "hf", options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run ``autorl eval --task TASK --model MODEL --limit N --json`` as a user would and check the record,
    then check the hidden-items contract (:func:`check_hidden_items_secret`) on the benchmark with ``options``.

    ``options`` become ``--benchmark-option KEY=VALUE`` (values as JSON).
    """
    import json
    import subprocess
    import sys
    import tempfile

    from autorl.plugins.registry import get_benchmark

    extra = [a for k, v in (options or {}).items() for a in ("--benchmark-option", f"{k}={json.dumps(v)}")]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "eval",
            "--task",
            task,
            "--model",
            model,
            "--limit",
            str(limit),
            "--backend",
            backend,
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, f"autorl eval failed:\n{proc.stderr}"
    record: dict[str, Any] = json.loads(proc.stdout)
    assert record["n"] == limit, record
    assert 0.0 <= record["score"] <= 100.0 and record["config_hash"], record
    assert record["ci95"][0] <= record["score"] <= record["ci95"][1], record
    with tempfile.TemporaryDirectory(prefix="autorl-hidden-check-") as scratch:
        check_hidden_items_secret(get_benchmark(task)(dict(options or {})), Path(scratch))
    return record


def check_hidden_items_secret(benchmark: Any, root: Path) -> None:
    """Check the hidden-items contract for ``benchmark`` (an instance), using scratch folders under ``root``.

    - ``load_items`` on an empty hidden folder raises :class:`autorl.errors.HiddenDataError` with a one-line
      message, and writes no items there;
    - hidden items prepared in two fresh folders (two secrets, as two installations) differ in content (not
      merely in the folder their paths name) in every split drawn with the secret (all but
      ``public_splits``), and so do their hashes: nothing in the installed package computes them;
    - the secret file is the owner's only (0600); preparing again keeps the items; ids are unique;
    - the same ``AUTORL_HIDDEN_SECRET`` in two folders gives the same items (an operator reproduces a study).
    """
    import stat

    from autorl.hardening import draw, hidden_secret_env, item_contents, unprepared_refusal
    from autorl.hidden import HIDDEN_SECRET_ENV

    def portable(split_items: dict[str, Any], folder: Path) -> dict[str, list[str]]:
        # items as content, whatever folder they were prepared in (a game file's path is no difference)
        return {split: item_contents(items, folder, ids=True) for split, items in split_items.items()}

    hidden_dir = getattr(benchmark, "hidden_dir", None)  # the caller's, given back after the draws
    try:
        with hidden_secret_env(None):
            empty = root / "empty-hidden"
            empty.mkdir(parents=True)
            refused = unprepared_refusal(benchmark, empty)
            if refused is not None:
                where, what = refused
                raise AssertionError(f"{benchmark.name} {where}: {what}" if where else f"{benchmark.name}: {what}")

            public = set(getattr(benchmark, "public_splits", ()))
            folders: list[Path] = []
            items: list[dict[str, Any]] = []

            def install() -> dict[str, list[str]]:
                folder = root / f"hidden-{'abcdefgh'[len(folders)]}"
                folders.append(folder)
                items.append(portable(draw(benchmark, folder), folder))
                secret = folder / "secret"
                assert secret.is_file() and not secret.is_symlink(), f"{benchmark.name} wrote no secret in {folder}"
                assert stat.S_IMODE(secret.stat().st_mode) == 0o600, oct(secret.stat().st_mode)
                return items[-1]

            install()
            install()
            if any(items[0][s] == items[1][s] for s in benchmark.splits if s not in public):
                install()  # two secrets may draw the same few items from a small pool; a third rarely does again
                if all(items[2][s] != items[0][s] for s in benchmark.splits if s not in public):
                    folders[1], items[1] = folders[2], items[2]
            for split in benchmark.splits:
                a, b = items[0][split], items[1][split]
                loaded = benchmark.load_items(split, folders[0])
                assert loaded, f"{benchmark.name} {split}: no hidden items"
                assert len({i.id for i in loaded}) == len(loaded), f"{benchmark.name} {split}: duplicate item ids"
                if split in public:
                    continue
                assert a != b, (
                    f"{benchmark.name} {split}: the same items under two secrets (computable from the package)"
                )
                assert benchmark.hidden_items_hash(split, folders[0]) != benchmark.hidden_items_hash(split, folders[1])
            benchmark.prepare_eval_data(folders[0])
            again = portable({s: benchmark.load_items(s, folders[0]) for s in benchmark.splits}, folders[0])
            assert again == items[0], "prepare is not idempotent"

            given = [
                portable(draw(benchmark, root / name, secret="ab" * 32), root / name) for name in ("given-a", "given-b")
            ]
            assert given[0] == given[1], f"{benchmark.name}: {HIDDEN_SECRET_ENV} does not reproduce the hidden items"
    finally:
        benchmark.hidden_dir = hidden_dir


def check_train_data_holds_no_hidden_item(benchmark: Any, root: Path) -> None:
    """Prepare ``benchmark``'s (an instance) data under ``root`` as a run does and check that the training data
    holds no hidden item, found the way the run's audit finds them in what an agent wrote (n-grams of each
    item's ``input`` values, whatever its fields are called): a hit here would flag every run of the benchmark."""
    from autorl.audit import check_overlap

    hidden = prepare_as_a_run(benchmark, root)
    items = {split: benchmark.load_items(split, hidden) for split in benchmark.splits}
    assert all(items.values()), f"{benchmark.name}: no hidden items"
    flags = check_overlap(root / "train", items)
    assert not flags, f"{benchmark.name}: hidden items in the training data: {[f.detail for f in flags]}"


def prepare_as_a_run(benchmark: Any, root: Path) -> Path:
    """Prepare ``benchmark``'s (an instance) data under ``root`` as a run does: ``hidden_dir`` set to
    ``root/hidden``, the hidden items prepared there, then the training data in ``root/train``. Returns the
    hidden folder."""
    hidden = root / "hidden"
    benchmark.hidden_dir = hidden
    benchmark.prepare_eval_data(hidden)
    benchmark.prepare_train_data(root / "train")
    return hidden


def check_agent_view(benchmark: Any, root: Path) -> None:
    """Prepare ``benchmark``'s (an instance) data under ``root`` as a run does, then make the check a run makes
    before its agent starts (:func:`autorl.sandbox.offered.check_offered`) on what it offers its agent; fails with
    the run's one-line refusal."""
    from autorl.errors import UsageError
    from autorl.resources import autorl_home
    from autorl.sandbox.agent import agent_masks
    from autorl.sandbox.offered import check_offered

    hidden = prepare_as_a_run(benchmark, root)
    try:
        check_offered(
            benchmark, hidden, plugin="this plugin", masked=agent_masks(autorl_home(), autorl_home() / "runs")
        )
    except UsageError as exc:
        raise AssertionError(str(exc)) from None


def check_claims_score_zero(benchmark: Any, hidden: Path, claims: Sequence[str], split: str = "dev") -> list[Any]:
    """An interactive benchmark (an :class:`~autorl.evaluation.episode.EpisodeBenchmark` instance) played by a
    policy that answers each turn with the next of ``claims`` (words that look like success to a careless
    harness: the environment's own success lines, reward lines, control characters) scores 0 on every item of
    ``split`` in ``hidden``, each played to its end, none crashed. Returns the item results."""
    import itertools

    from autorl.evaluation.episode import EpisodeEvaluator

    items = benchmark.load_items(split, hidden)
    turns = itertools.cycle(claims)
    results = EpisodeEvaluator().evaluate(benchmark, items, PolicyBackend(lambda prompt: next(turns)))
    assert [r.score for r in results] == [0.0] * len(items), [(r.id, r.score) for r in results if r.score]
    assert all(r.error is None for r in results), [r.error for r in results if r.error]  # not crashed
    return results


def check_hardening(
    benchmark: Any,
    root: Path,
    *,
    draws: int = 4,
    limit: int = 4,
    completions: dict[str, str] | None = None,
    evaluator: bool = True,
    score: bool = True,
    skip: Sequence[str] = (),
) -> list[Any]:
    """Run :func:`autorl.hardening.harden` on ``benchmark`` (an instance or a factory, e.g. the class) with scratch
    folders under ``root`` and fail with one line per check that got through; returns the checks.

    ``draws`` preparations with fresh secrets; ``limit`` dev items scored with each adversarial completion
    (:data:`autorl.hardening.ADVERSARIAL`, or ``completions``) through the evaluator and/or ``score()``;
    ``skip`` leaves checks out by name (say why beside the call).
    """
    from autorl.hardening import harden

    checks = harden(
        benchmark, root, draws=draws, limit=limit, completions=completions, evaluator=evaluator, score=score, skip=skip
    )
    holes = [c.line() for c in checks if not c.held]
    assert not holes, "hardening checks got through:\n" + "\n".join(holes)
    return checks


class PolicyBackend(Backend):
    """A backend that answers each prompt with ``policy(prompt)`` and records the size of every batched call:
    for testing interactive benchmarks with scripted (expert, random, bad) policies without a model."""

    name = "policy"

    def __init__(self, policy: Callable[[Any], str]) -> None:
        super().__init__({})
        self.policy = policy
        self.calls: list[int] = []

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        pass

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.calls.append(len(requests))
        return [Completion([self.policy(r.prompt)], 1) for r in requests]


def assert_plugin_discovered(name: str, distribution: str) -> None:
    """``autorl plugins`` (a subprocess, as a user runs it) lists plugin ``name`` from ``distribution``."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "from autorl.cli import main; main(['plugins'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    plugins = {p["name"]: p for p in json.loads(out)}
    assert name in plugins, f"plugin {name} not discovered: {sorted(plugins)}"
    assert plugins[name]["distribution"] == distribution, plugins[name]
