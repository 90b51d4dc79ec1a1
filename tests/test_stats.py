"""Statistics that every score carries."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from autorl.evaluation.stats import paired_compare, summarize


def test_summary_of_binary_scores_uses_wilson() -> None:
    s = summarize([1.0] * 30 + [0.0] * 70)
    assert s.n == 100 and s.mean == pytest.approx(30.0) and s.method == "wilson"
    assert s.stderr == pytest.approx(100 * np.std([1.0] * 30 + [0.0] * 70, ddof=1) / 10)
    lo, hi = s.ci95
    assert lo == pytest.approx(21.9, abs=0.1) and hi == pytest.approx(39.6, abs=0.1)
    assert summarize([1.0] * 10).ci95[1] == pytest.approx(100.0)
    assert summarize([0.0] * 10).ci95[0] == pytest.approx(0.0)


def test_summary_of_graded_scores_uses_t() -> None:
    values = [0.1, 0.5, 0.7, 0.2, 0.9]
    s = summarize(values)
    t = sps.t.ppf(0.975, 4) * np.std(values, ddof=1) / np.sqrt(5)
    assert s.method == "t"
    assert s.ci95 == pytest.approx((100 * (np.mean(values) - t), 100 * (np.mean(values) + t)))


def test_identical_predictions_give_zero_difference() -> None:
    scores = {f"i{k}": float(k % 3 == 0) for k in range(200)}
    comp = paired_compare(scores, dict(scores))
    assert comp.difference == 0.0
    assert comp.ci95[0] <= 0.0 <= comp.ci95[1]
    assert comp.p_value == 1.0 and comp.ties == 200


def test_known_shift_is_recovered() -> None:
    rng = np.random.default_rng(1)
    base = {f"i{k}": float(rng.random() < 0.3) for k in range(400)}
    ids = sorted(base)
    # flip exactly 60 wrong answers to right: +15 points
    flipped = [i for i in ids if base[i] == 0.0][:60]
    cand = {i: (1.0 if i in flipped else base[i]) for i in ids}
    comp = paired_compare(base, cand)
    assert comp.difference == pytest.approx(15.0)
    assert comp.ci95[0] > 10.0 and comp.ci95[1] < 20.0
    assert comp.wins == 60 and comp.losses == 0 and comp.test == "mcnemar-exact"
    assert comp.p_value == pytest.approx(sps.binomtest(60, 60, 0.5).pvalue)


def test_mcnemar_counts_only_discordant_items() -> None:
    base = {"a": 1.0, "b": 0.0, "c": 1.0, "d": 0.0, "e": 1.0}
    cand = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "e": 1.0}
    comp = paired_compare(base, cand)
    assert (comp.wins, comp.losses, comp.ties) == (2, 1, 2)
    assert comp.p_value == pytest.approx(sps.binomtest(2, 3, 0.5).pvalue)


def test_pairing_requires_the_same_items() -> None:
    with pytest.raises(ValueError, match="same items"):
        paired_compare({"a": 1.0}, {"b": 1.0})


def test_bootstrap_is_reproducible() -> None:
    base = {f"i{k}": float(k % 2) for k in range(50)}
    cand = {f"i{k}": float(k % 3 == 0) for k in range(50)}
    assert paired_compare(base, cand).ci95 == paired_compare(base, cand).ci95


def test_interval_holds_the_mean_at_the_edges() -> None:
    for n in (1, 2, 3, 7, 10, 33, 100):
        for values in ([0.0] * n, [1.0] * n):
            st = summarize(values)
            assert st.ci95[0] <= st.mean <= st.ci95[1], (n, values[0], st)
