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
    assert comp.p_value == 1.0 and comp.ties == 200
    # no item changed, but 200 items cannot rule out a small change: the interval is not the point 0
    upper = 100 * sps.beta.ppf(0.975, 1, 200)
    assert comp.ci95 == pytest.approx((-upper, upper)) and 1.0 < upper < 2.0


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


def _binary_pair(wins: int, losses: int, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """n items: ``wins`` the candidate alone gets right, ``losses`` the baseline alone, a third of the rest both."""
    base, cand = {}, {}
    for k in range(n):
        both = float(k % 3 == 0)
        base[f"i{k}"], cand[f"i{k}"] = (0.0, 1.0) if k < wins else (1.0, 0.0) if k < wins + losses else (both, both)
    return base, cand


def _excludes_zero(ci: tuple[float, float]) -> bool:
    return ci[0] > 0.0 or ci[1] < 0.0


def test_four_wins_no_losses_on_300_items_is_not_significant_by_either() -> None:
    comp = paired_compare(*_binary_pair(4, 0, 300))
    assert comp.p_value == pytest.approx(0.125)
    assert comp.ci95[0] < 0.0 < comp.ci95[1]
    # items only moved one way: the interval reaches past the observed +1.33, since more items could move
    assert comp.ci95[1] > comp.difference + 0.5


@pytest.mark.parametrize("n", [1, 2, 5, 10, 30, 100, 300, 1000])
def test_binary_interval_and_p_value_never_disagree(n: int) -> None:
    counts = sorted({0, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100, 200, 400} | {n // 2, n})
    for wins in counts:
        for losses in counts:
            if wins + losses > n:
                continue
            comp = paired_compare(*_binary_pair(wins, losses, n))
            assert comp.test == "mcnemar-exact" and (comp.wins, comp.losses) == (wins, losses)
            assert _excludes_zero(comp.ci95) == (comp.p_value < 0.05), (wins, losses, n, comp)
            assert comp.ci95[0] <= comp.difference <= comp.ci95[1]
            expected = sps.binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
            assert comp.p_value == pytest.approx(expected, rel=1e-9)


def test_binary_interval_is_clopper_pearson_on_the_changed_items() -> None:
    wins, losses, n = 30, 10, 200
    comp = paired_compare(*_binary_pair(wins, losses, n))
    pi = sps.binomtest(wins, wins + losses).proportion_ci(method="exact")
    share = sps.binomtest(wins + losses, n).proportion_ci(method="exact")
    # both ends of the winning share are above 1/2: the low end takes the low share, the high end the high one
    assert comp.ci95 == pytest.approx((100 * share.low * (2 * pi.low - 1), 100 * share.high * (2 * pi.high - 1)))
    assert comp.p_value < 0.05 and comp.ci95[0] > 0


def test_graded_scores_use_a_paired_t_for_both_interval_and_p() -> None:
    rng = np.random.default_rng(3)
    base = {f"i{k}": float(rng.random()) for k in range(40)}
    cand = {i: min(1.0, v + float(rng.normal(0.05, 0.2))) for i, v in base.items()}
    comp = paired_compare(base, cand)
    ids = sorted(base)
    ref = sps.ttest_rel([cand[i] for i in ids], [base[i] for i in ids])
    ci = ref.confidence_interval(0.95)
    assert comp.test == "paired-t"
    assert comp.p_value == pytest.approx(ref.pvalue)
    assert comp.ci95 == pytest.approx((100 * ci.low, 100 * ci.high))


def test_graded_interval_and_p_value_never_disagree() -> None:
    rng = np.random.default_rng(4)
    disagreements, significant = 0, 0
    for _ in range(400):
        n = int(rng.integers(2, 60))
        base = {f"i{k}": float(rng.random()) for k in range(n)}
        shift = float(rng.normal(0.0, 0.1))
        cand = {i: float(np.clip(v + shift + rng.normal(0, 0.3), 0, 1)) for i, v in base.items()}
        comp = paired_compare(base, cand)
        disagreements += _excludes_zero(comp.ci95) != (comp.p_value < 0.05)
        significant += comp.p_value < 0.05
    assert disagreements == 0
    assert 20 < significant < 380  # the grid holds both outcomes


def test_a_single_graded_item_has_the_whole_range_as_its_interval() -> None:
    comp = paired_compare({"a": 0.3}, {"a": 0.8})
    assert comp.difference == pytest.approx(50.0)
    assert comp.ci95 == (-100.0, 100.0) and comp.p_value == 1.0
    assert comp.ci95[1] - comp.ci95[0] > 0


def test_comparison_is_deterministic() -> None:
    base = {f"i{k}": float(k % 2) for k in range(50)}
    cand = {f"i{k}": float(k % 3 == 0) for k in range(50)}
    assert paired_compare(base, cand) == paired_compare(base, cand)


def test_interval_holds_the_mean_at_the_edges() -> None:
    for n in (1, 2, 3, 7, 10, 33, 100):
        for values in ([0.0] * n, [1.0] * n):
            st = summarize(values)
            assert st.ci95[0] <= st.mean <= st.ci95[1], (n, values[0], st)
