"""Uncertainty on every score, and the paired comparison of a checkpoint against its baseline.

Scores are reported in percentage points (per-item scores in [0, 1] times 100).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

Z95 = 1.959963984540054


@dataclass(frozen=True)
class ScoreStats:
    """n, mean, standard error and a 95% interval, in percentage points.

    For 0/1 scores the interval is Wilson's (sound near 0% and 100%); otherwise a t interval.
    """

    n: int
    mean: float
    stderr: float
    ci95: tuple[float, float]
    method: str

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95)
        return d


@dataclass(frozen=True)
class PairedComparison:
    """Candidate minus baseline on the same items, in percentage points."""

    n: int
    difference: float
    ci95: tuple[float, float]
    p_value: float
    test: str
    wins: int
    losses: int
    ties: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ci95"] = list(self.ci95)
        return d


def _is_binary(values: np.ndarray) -> bool:
    return bool(np.all((values == 0.0) | (values == 1.0)))


def summarize(scores: Sequence[float]) -> ScoreStats:
    """Mean and uncertainty of per-item scores in [0, 1]."""
    values = np.asarray(scores, dtype=float)
    n = int(values.size)
    if n == 0:
        return ScoreStats(0, 0.0, 0.0, (0.0, 0.0), "empty")
    mean = float(values.mean())
    stderr = float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    if _is_binary(values):
        denom = 1 + Z95**2 / n
        centre = (mean + Z95**2 / (2 * n)) / denom
        half = Z95 * math.sqrt(mean * (1 - mean) / n + Z95**2 / (4 * n * n)) / denom
        lo, hi, method = centre - half, centre + half, "wilson"
    else:
        from scipy import stats

        t = float(stats.t.ppf(0.975, n - 1)) if n > 1 else 0.0
        lo, hi, method = mean - t * stderr, mean + t * stderr, "t"
    # the interval holds the mean (rounding can put a Wilson bound a hair past it when the mean is 0 or 1)
    lo, hi = min(lo, mean), max(hi, mean)
    return ScoreStats(n, 100 * mean, 100 * stderr, (100 * max(lo, 0.0), 100 * min(hi, 1.0)), method)


def paired_compare(
    baseline: Mapping[str, float],
    candidate: Mapping[str, float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairedComparison:
    """Compare per-item scores keyed by item id. Both must cover the same items.

    The interval is a paired bootstrap (items resampled, both scores kept together). The p-value is the
    exact McNemar test for 0/1 scores, else the two-sided sign test; both are binomial tests on the
    items where the two disagree.
    """
    if set(baseline) != set(candidate):
        missing = len(set(baseline) ^ set(candidate))
        raise ValueError(f"paired comparison needs the same items; {missing} item ids differ")
    ids = sorted(baseline)
    n = len(ids)
    if n == 0:
        return PairedComparison(0, 0.0, (0.0, 0.0), 1.0, "none", 0, 0, 0)
    b = np.array([baseline[i] for i in ids], dtype=float)
    c = np.array([candidate[i] for i in ids], dtype=float)
    diff = c - b
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    ties = n - wins - losses
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    means = diff[idx].mean(axis=1)
    lo, hi = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    from scipy import stats

    discordant = wins + losses
    p = float(stats.binomtest(wins, discordant, 0.5).pvalue) if discordant else 1.0
    test = "mcnemar-exact" if _is_binary(b) and _is_binary(c) else "sign"
    return PairedComparison(n, 100 * float(diff.mean()), (100 * lo, 100 * hi), p, test, wins, losses, ties)
