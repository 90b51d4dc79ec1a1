"""Hardening checks of a benchmark: what an agent holding the installed package, its own data and its own secret
cannot get from it.

Each check returns a :class:`Check` (a name, held or not, the evidence in one line) rather than raising, so
that a plugin's tests (:func:`autorl.testing.check_hardening`) and ``autorl selftest`` report every hole at once.
The pieces of the hidden-items contract that these checks and :func:`autorl.testing.check_hidden_items_secret` share
are here too: :func:`hidden_secret_env`, :func:`draw`, :func:`item_contents` and :func:`unprepared_refusal`.

- ``secret-draws``: hidden items prepared under several secrets (as several installations) differ as *sets*
  beyond chance: identical draws mean the items need no secret; a part of a split present in every draw more
  often than chance predicts is computable from the package.
- ``no-secret-no-items``: ``load_items`` on a folder without prepared items fails with a one-line
  :class:`~autorl.errors.HiddenDataError`, even with an agent-chosen ``AUTORL_HIDDEN_SECRET``, and writes nothing.
- ``scorer-escapes``: adversarial completions (early exit, exceptions, patched builtins, output floods, answer
  shotguns, success words, control characters) score 0 through the benchmark's own evaluator and ``score()``.
- ``nothing-visible``: the description and the training data hold no hidden item of any draw.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import HiddenDataError
from autorl.hidden import HIDDEN_SECRET_ENV
from autorl.inference.base import Backend, Completion, GenerationRequest

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark
    from autorl.scoring import Item

#: Completions that score under a harness that trusts an exit status, a printed word, the first or any number.
ADVERSARIAL: dict[str, str] = {
    "empty": "",
    "os._exit(0) in the body": "    import os\n    os._exit(0)\n",
    "os._exit(0) at top level": "    return True\nimport os\nos._exit(0)\n",
    "SystemExit in the body": "    raise SystemExit(0)\n",
    "sys.exit(0) at top level": "    return True\nimport sys\nsys.exit(0)\n",
    "exception raised": "    raise RuntimeError('boom')\nraise RuntimeError('boom')\n",
    "excepthook exits 0": "    return None\nimport os, sys\nsys.excepthook = lambda *a: os._exit(0)\n",
    "builtins patched": (
        "    return None\nimport builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\n"
        "builtins.len = lambda x: 0\nbuiltins.abs = lambda x: 0\n"
    ),
    "equals everything": (
        "    class Anything:\n        def __eq__(self, other):\n            return True\n"
        "        def __bool__(self):\n            return True\n    return Anything()\n"
    ),
    "success words": 'PASSED\nAll tests passed.\n{"passed": true, "correct": true}\nCorrect!\n',
    "output flood": "9" * (1 << 18),
    "answer shotgun": "-987654321 " + " ".join(str(i) for i in range(2000, -1, -1)) + " -987654321",
    "control characters": "\x00\x1b[2J\x1b]0;x\x07\ufeff\u202e\r\n",
}


@dataclass(frozen=True)
class Check:
    """One hardening check: its name, whether the benchmark held, and the evidence in one line."""

    name: str
    held: bool
    detail: str
    #: False when nothing could be tried (an evaluator that cannot run here): not held, and not a hole either
    tested: bool = True

    def line(self) -> str:
        return f"{self.name}: {'held' if self.held else 'GOT THROUGH'}: {self.detail}"


def item_contents(items: Sequence[Item], folder: Path, *, ids: bool = False) -> list[str]:
    """Each item as content (input and reference; its id too where ``ids``), whatever the folder a path of its
    names: two installations' items compare equal where they hold the same."""
    return [
        json.dumps([*([i.id] if ids else []), dict(i.input), i.reference], sort_keys=True, default=str).replace(
            str(folder), "<hidden>"
        )
        for i in items
    ]


@contextmanager
def hidden_secret_env(value: str | None) -> Iterator[None]:
    """``AUTORL_HIDDEN_SECRET`` set to ``value`` (or unset) for a block, restored after."""
    saved = os.environ.pop(HIDDEN_SECRET_ENV, None)
    if value is not None:
        os.environ[HIDDEN_SECRET_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(HIDDEN_SECRET_ENV, None)
        if saved is not None:
            os.environ[HIDDEN_SECRET_ENV] = saved


def draw(benchmark: Benchmark, folder: Path, secret: str | None = None) -> dict[str, list[Item]]:
    """Prepare ``benchmark``'s hidden items in a fresh ``folder`` and load them: with a fresh secret of the
    folder's own (``secret`` None, as a new installation), or with ``AUTORL_HIDDEN_SECRET`` set to ``secret``."""
    folder.mkdir(parents=True, mode=0o700)
    with hidden_secret_env(secret):
        benchmark.hidden_dir = folder
        benchmark.prepare_eval_data(folder)
        return {split: benchmark.load_items(split, folder) for split in benchmark.splits}


def unprepared_refusal(benchmark: Benchmark, folder: Path) -> tuple[str | None, str] | None:
    """What is wrong with ``load_items`` on ``folder``, which holds no prepared items, under the secret the
    environment holds: (the split or None, what, in one line); None where every split fails with a one-line
    :class:`~autorl.errors.HiddenDataError` and nothing but a secret was written there."""
    for split in benchmark.splits:
        try:
            got = benchmark.load_items(split, folder)
        except HiddenDataError as exc:
            if not str(exc) or "\n" in str(exc):
                return split, "not a one-line error"
            continue
        except Exception as exc:  # any other failure is the finding itself
            return split, f"{type(exc).__name__} instead of HiddenDataError"
        return split, f"load_items gave {len(got)} items from a folder holding none"
    written = sorted(p.name for p in folder.rglob("*") if p.is_file() and p.name != "secret")
    return (None, f"load_items wrote {written[:3]}") if written else None


def check_secret_draws(benchmark: Benchmark, draws: Sequence[tuple[Path, Mapping[str, Sequence[Item]]]]) -> Check:
    """The hidden splits drawn with the secret differ across ``draws`` (folder, items) beyond chance.

    Under independent draws an item of a split is in all ``k`` draws about ``n q^(k-1)`` times (``q`` the mean
    share two draws have in common); items present in every draw well beyond that need no secret.
    """
    secret_splits = [s for s in benchmark.splits if s not in set(benchmark.public_splits)]
    k = len(draws)
    if k < 2:
        return Check("secret-draws", False, "fewer than two draws to compare")
    notes = []
    for split in secret_splits:
        sets = [set(item_contents(items[split], folder)) for folder, items in draws]
        if not all(sets):
            return Check("secret-draws", False, f"{split}: a draw holds no item")
        if all(s == sets[0] for s in sets):
            return Check(
                "secret-draws",
                False,
                f"{split}: the same {len(sets[0])} items under {k} secrets: "
                "the items need no secret (computable from the package)",
            )
        n = sum(len(s) for s in sets) / k
        q = sum(len(a & b) / math.sqrt(len(a) * len(b)) for a, b in combinations(sets, 2)) / math.comb(k, 2)
        always = len(set.intersection(*sets))
        expected = n * q ** (k - 1)
        bound = expected + 3 * math.sqrt(expected) + 1
        if always > bound:
            return Check(
                "secret-draws",
                False,
                f"{split}: {always} of {n:.0f} items are in all {k} draws, chance "
                f"gives {expected:.1f}: they need no secret",
            )
        notes.append(f"{split} {always}/{n:.0f} in all draws (chance {expected:.1f})")
    if not secret_splits:
        return Check("secret-draws", True, "every split is public (n/a)")
    return Check("secret-draws", True, f"{k} secrets: " + "; ".join(notes))


def check_no_secret_no_items(benchmark: Benchmark, root: Path) -> Check:
    """``load_items`` without prepared items fails (one line), with or without an agent-chosen secret."""
    for label, secret in (("no secret", None), ("the agent's own secret", secrets.token_hex(32))):
        folder = root / f"unprepared-{'a' if secret is None else 'b'}"
        folder.mkdir(parents=True, mode=0o700)
        with hidden_secret_env(secret):
            refused = unprepared_refusal(benchmark, folder)
        if refused is not None:
            split, what = refused
            return Check("no-secret-no-items", False, f"{split} ({label}): {what}" if split else f"{what} ({label})")
    return Check("no-secret-no-items", True, f"{len(benchmark.splits)} split(s) refused without prepared items")


class ScriptedBackend(Backend):
    """A backend answering every request with one fixed completion (a policy for interactive benchmarks)."""

    name = "scripted"

    def __init__(self, answer: str | Callable[[Any], str]) -> None:
        super().__init__({})
        self.answer = answer

    def load(self, model_dir: Path, base_model_dir: Path | None = None) -> None:
        pass

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        reply = self.answer
        return [Completion([reply(r.prompt) if callable(reply) else reply] * r.n, 1) for r in requests]


def check_scorer_escapes(
    benchmark: Benchmark,
    items: Sequence[Item],
    completions: Mapping[str, str] | None = None,
    *,
    evaluator: bool = True,
    score: bool = True,
) -> Check:
    """Every adversarial completion scores 0 on every one of ``items`` (hidden items, prepared), through the
    benchmark's evaluator (``evaluator``) and its ``score()`` (``score``: what agents use as a reward)."""
    from autorl.evaluation.generation import evaluator_for

    attacks = dict(ADVERSARIAL if completions is None else completions)
    scored_once = False
    for label, text in attacks.items():
        if evaluator:
            try:
                results = evaluator_for(benchmark).evaluate(benchmark, list(items), ScriptedBackend(text))
            except Exception as exc:  # nothing was scored, so nothing was shown: say why
                why = str(exc).splitlines()[0][:200] if str(exc) else ""
                return Check(
                    "scorer-escapes",
                    False,
                    f"{label}: the evaluator failed, nothing was scored ({type(exc).__name__}: {why})",
                    tested=False,
                )
            scored = [r for r in results if r.score != 0]
            if scored:
                return Check(
                    "scorer-escapes",
                    False,
                    f"{label}: the evaluator scored {scored[0].score} on "
                    f"{scored[0].id} ({len(scored)} of {len(results)} items)",
                )
        if score:
            for item in items:
                try:
                    value = benchmark.score(item, text)
                except Exception:  # the evaluator turns a raising score() into 0
                    continue
                scored_once = True
                if value != 0:
                    return Check("scorer-escapes", False, f"{label}: score() gave {value} on {item.id}")
    if not evaluator and not scored_once:
        return Check(
            "scorer-escapes",
            False,
            "score() raised on every completion and no evaluator ran: nothing "
            "was scored (leave the check out where only another scorer scores)",
            tested=False,
        )
    return Check("scorer-escapes", True, f"{len(attacks)} adversarial completions scored 0 on {len(items)} items")


def check_nothing_visible(
    benchmark: Benchmark, root: Path, draws: Sequence[tuple[Path, Mapping[str, Sequence[Item]]]]
) -> Check:
    """Neither the description nor the training data (prepared for each draw's folder, as a run prepares it)
    holds a hidden item of that draw, found the way the run's audit finds them."""
    from autorl.audit import check_overlap

    for n, (folder, items) in enumerate(draws):
        seen = root / f"visible-{n}"
        (seen / "check").mkdir(parents=True)
        benchmark.hidden_dir = folder
        (seen / "check" / "description.md").write_text(benchmark.description())
        benchmark.prepare_train_data(seen / "check" / "data")
        flags = check_overlap(seen, {s: list(v) for s, v in items.items()}, benchmark.dev_public)
        if flags:
            where = sorted({e for f in flags for e in f.evidence if " item " not in e})
            return Check("nothing-visible", False, f"hidden items in {', '.join(where)} (draw {n}): {flags[0].detail}")
    return Check(
        "nothing-visible", True, f"the description and training data of {len(draws)} draws hold no hidden item"
    )


#: The checks, in the order :func:`harden` runs them.
CHECKS = ("secret-draws", "no-secret-no-items", "scorer-escapes", "nothing-visible")


def harden(
    benchmark: Benchmark | Callable[[], Benchmark],
    root: Path,
    *,
    draws: int = 4,
    limit: int = 4,
    completions: Mapping[str, str] | None = None,
    evaluator: bool = True,
    score: bool = True,
    skip: Sequence[str] = (),
) -> list[Check]:
    """Every hardening check of ``benchmark`` (an instance, or a factory called for each draw), with scratch
    folders under ``root``: ``draws`` preparations with fresh secrets, ``limit`` dev items for the scorer.
    ``skip`` names checks (of :data:`CHECKS`) to leave out; they are not in the result."""
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown hardening checks {unknown}: the checks are {', '.join(CHECKS)}")
    from autorl.benchmark import Benchmark

    def fresh() -> Benchmark:
        return benchmark if isinstance(benchmark, Benchmark) else benchmark()

    made: list[tuple[Path, Mapping[str, Sequence[Item]]]] = []
    for n in range(draws):
        folder = root / f"draw-{n}"
        made.append((folder, draw(fresh(), folder)))
    bench = fresh()
    checks = []
    if "secret-draws" not in skip:
        checks.append(check_secret_draws(bench, made))
    if "no-secret-no-items" not in skip:
        checks.append(check_no_secret_no_items(bench, root / "unprepared"))
    if "scorer-escapes" not in skip:
        first_folder, first = made[0]
        bench.hidden_dir = first_folder
        split = "dev" if "dev" in first else bench.splits[0]
        with hidden_secret_env(None):
            checks.append(
                check_scorer_escapes(bench, list(first[split])[:limit], completions, evaluator=evaluator, score=score)
            )
    if "nothing-visible" not in skip:
        checks.append(check_nothing_visible(fresh(), root / "visible", made))
    return checks
