"""The plugin author's hardening checks (``autorl.testing.check_hardening``): arith holds every one, and each
weakened benchmark below (the holes a reward-hacking agent uses) is reported by the check that covers it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autorl.builtin.arith import Arith, _item, public_pairs
from autorl.errors import HiddenDataError
from autorl.hardening import harden
from autorl.hidden import HIDDEN_SECRET_ENV, write_hidden_items
from autorl.scoring import Item
from autorl.testing import check_hardening, check_hidden_items_secret


@pytest.fixture(autouse=True)
def _no_operator_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HIDDEN_SECRET_ENV, raising=False)


def test_arith_holds_every_check(tmp_path: Path) -> None:
    checks = check_hardening(Arith, tmp_path)
    assert [c.name for c in checks] == ["secret-draws", "no-secret-no-items", "scorer-escapes", "nothing-visible"]
    assert all(c.held and c.detail for c in checks)


def test_the_arith_description_example_is_a_training_pair() -> None:
    # the description is the same under every secret: its example must never be a hidden item
    assert "What is 28+26?" in Arith().description()
    assert (28, 26) in public_pairs("train") and (28, 26) not in public_pairs("pool")


class Unsecret(Arith):
    """Hidden items fixed by the package's own seed: the same under every secret."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        pool = public_pairs("pool")
        write_hidden_items(hidden_dir, "dev", [_item("dev", a, b) for a, b in pool[:300]])
        write_hidden_items(hidden_dir, "test", [_item("test", a, b) for a, b in pool[300:800]])


class ShuffledOnly(Arith):
    """The secret only orders a fixed set: the same items (as a set) under every secret."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        from autorl.hidden import secret_rng

        pool = public_pairs("pool")
        for split, part in (("dev", pool[:300]), ("test", pool[300:800])):
            part = list(part)
            secret_rng(hidden_dir, split).shuffle(part)
            write_hidden_items(hidden_dir, split, [_item(split, a, b) for a, b in part])


class HalfFixed(Arith):
    """Half of each split fixed, the other half drawn with the secret: only a comparison with chance sees it."""

    def prepare_eval_data(self, hidden_dir: Path) -> None:
        from autorl.hidden import secret_rng

        pool = public_pairs("pool")
        rest = list(pool[400:])
        secret_rng(hidden_dir, "rest").shuffle(rest)
        write_hidden_items(hidden_dir, "dev", [_item("dev", a, b) for a, b in pool[:150] + rest[:150]])
        write_hidden_items(hidden_dir, "test", [_item("test", a, b) for a, b in pool[150:400] + rest[150:400]])


class BuildsOnLoad(Arith):
    """``load_items`` that prepares what is missing: anyone holding the package loads items."""

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        self.prepare_eval_data(hidden_dir)
        return super().load_items(split, hidden_dir)


class TrustsWords(Arith):
    """A scorer that gives credit to a completion claiming success, or holding the answer anywhere."""

    def score(self, item: Item, completion: str) -> float:
        return 1.0 if "PASSED" in completion or str(item.reference) in completion.split() else 0.0


class LeakyDescription(Arith):
    """A description whose example is a hidden item of whatever secret is in force."""

    def description(self) -> str:
        assert self.hidden_dir is not None
        first = self.load_items("test", self.hidden_dir)[0]
        return f"Example: {first.input['question']}"


@pytest.mark.parametrize(
    ("weak", "hole", "evidence"),
    [
        (Unsecret, "secret-draws", "need no secret"),
        (ShuffledOnly, "secret-draws", "the same 300 items under 4 secrets"),
        (HalfFixed, "secret-draws", "in all 4 draws, chance gives"),
        (BuildsOnLoad, "no-secret-no-items", "load_items gave 300 items"),
        (TrustsWords, "scorer-escapes", "success words"),
        (LeakyDescription, "nothing-visible", "check/description.md"),
    ],
)
def test_each_hole_is_reported(tmp_path: Path, weak: type[Arith], hole: str, evidence: str) -> None:
    checks = {c.name: c for c in harden(weak, tmp_path)}
    assert not checks[hole].held, checks[hole]
    assert evidence in checks[hole].detail, checks[hole].detail
    assert [c.name for c in checks.values() if not c.held] == [hole], [c.line() for c in checks.values()]
    with pytest.raises(AssertionError, match=f"{hole}: GOT THROUGH"):
        check_hardening(weak, tmp_path / "kit")


def test_an_answer_anywhere_scorer_falls_to_the_shotgun(tmp_path: Path) -> None:
    class AnyNumber(Arith):
        def score(self, item: Item, completion: str) -> float:
            return 1.0 if str(item.reference) in completion.split() else 0.0

    [check] = [c for c in harden(AnyNumber, tmp_path) if c.name == "scorer-escapes"]
    assert not check.held and "answer shotgun" in check.detail


def test_chance_overlap_of_a_small_pool_is_no_finding(tmp_path: Path) -> None:
    # 40 of 60 pairs in dev under every secret: most items recur by chance alone, and that is not a hole
    class SmallPool(Arith):
        def prepare_eval_data(self, hidden_dir: Path) -> None:
            from autorl.hidden import secret_rng

            pool = list(public_pairs("pool")[:60])
            secret_rng(hidden_dir, "small").shuffle(pool)
            write_hidden_items(hidden_dir, "dev", [_item("dev", a, b) for a, b in pool[:40]])
            write_hidden_items(hidden_dir, "test", [_item("test", a, b) for a, b in pool[40:]])

    [check] = [c for c in harden(SmallPool, tmp_path, draws=5) if c.name == "secret-draws"]
    assert check.held, check.detail


class LongRefusal(Arith):
    """A refusal of unprepared items that runs over several lines (a traceback pasted into the message)."""

    def load_items(self, split: str, hidden_dir: Path) -> list[Item]:
        try:
            return super().load_items(split, hidden_dir)
        except HiddenDataError as exc:
            raise HiddenDataError(f"{exc}\n  (see the docs)") from None


@pytest.mark.parametrize(
    ("weak", "evidence"),
    [
        (Unsecret, "the same items under two secrets"),
        (BuildsOnLoad, "load_items gave 300 items from a folder holding none"),
        (LongRefusal, "dev: not a one-line error"),
    ],
)
def test_the_plugin_authors_contract_check_finds_what_the_hardening_checks_find(
    tmp_path: Path, weak: type[Arith], evidence: str
) -> None:
    # check_hidden_items_secret and harden share the draws, the secret's scope and the refusal of unprepared items
    bench = weak()
    with pytest.raises(AssertionError, match=evidence):
        check_hidden_items_secret(bench, tmp_path)
    assert bench.hidden_dir is None  # the caller's instance as it was given
    assert HIDDEN_SECRET_ENV not in os.environ


def test_the_contract_check_leaves_the_operators_secret_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HIDDEN_SECRET_ENV, "cd" * 32)
    check_hidden_items_secret(Arith(), tmp_path)
    assert os.environ[HIDDEN_SECRET_ENV] == "cd" * 32
