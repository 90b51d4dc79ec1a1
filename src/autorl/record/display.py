"""How a result reads on a screen: the one rule for p-values, intervals and signed differences, a run's result
in words (:func:`outcome`), and long run ids and local paths shortened (:func:`short_ids`, :func:`short_path`).

The command line, the dashboard and a notebook's ``repr`` all print through these functions, so one p-value
reads the same everywhere (``4.7e-06``, ``0.032``, ``<1e-300``) and a run below its baseline is never called a
success anywhere. Files (CSV, JSON) keep full precision and whole names instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "BEAT_BASELINE",
    "BELOW_BASELINE",
    "NO_CLEAR_CHANGE",
    "NO_TEST_SCORE",
    "OUTCOMES",
    "as_number",
    "as_pair",
    "beat_baseline",
    "fmt_ci",
    "fmt_p",
    "fmt_signed",
    "is_number",
    "outcome",
    "run_html",
    "run_repr",
    "short_ids",
    "short_path",
]

#: below this a p-value is shown as a bound: a double cannot tell such values apart from each other
P_FLOOR = 1e-300


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def fmt_p(p: Any) -> str:
    """A p-value: two significant digits, scientific below a thousandth, ``<1e-300`` at the floor, ``-`` for none.

    >>> fmt_p(4.65e-06), fmt_p(0.0321), fmt_p(0.0), fmt_p(None)
    ('4.7e-06', '0.032', '<1e-300', '-')
    """
    if not is_number(p) or p < 0:
        return "-"
    if p < P_FLOOR:
        return f"<{P_FLOOR:.0e}"
    if p < 1e-3:
        return f"{p:.1e}"
    return f"{p:.2g}"


def fmt_signed(value: Any, digits: int = 1) -> str:
    """A difference with its sign (``+2.5``), ``-`` for none."""
    return f"{value:+.{digits}f}" if is_number(value) else "-"


def fmt_ci(ci: Any, digits: int = 1) -> str:
    """An interval of differences (``[+0.5, +4.1]``), ``-`` unless it is a pair of numbers."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(is_number(v) for v in ci):
        return f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"
    return "-"


#: run ids up to this long are shown whole (a single run's, ``20261101T100000-2``); a study's are longer
SHORT_ID_LONGEST = 20
#: the fewest characters a shortened id keeps
SHORT_ID_LEAST = 12


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id as a screen shows it: whole when it is short (up to :data:`SHORT_ID_LONGEST` characters), else the
    shortest prefix of at least :data:`SHORT_ID_LEAST` that no other of ``ids`` starts with (git's and docker's
    short ids; the commands that take a run id accept such a prefix).

    >>> ids = ["f0e1d2c3b4a5968778695a4b-e1f2-a1", "a1b2c3d4e5f6a7b8c9d0-e1f2-a1", "a1b2c3d4e5f6a7b8c9d0-e1f2-a2"]
    >>> [short_ids([*ids, "20261101T100000"])[i] for i in [*ids, "20261101T100000"]]
    ['f0e1d2c3b4a5', 'a1b2c3d4e5f6a7b8c9d0-e1f2-a1', 'a1b2c3d4e5f6a7b8c9d0-e1f2-a2', '20261101T100000']
    """
    unique = sorted(set(ids))
    out = {}
    for i, rid in enumerate(unique):
        if len(rid) <= SHORT_ID_LONGEST:
            out[rid] = rid
            continue
        # the longest prefix it shares with a neighbour in sorted order is the longest it shares with any id
        shared = max((_common(rid, unique[j]) for j in (i - 1, i + 1) if 0 <= j < len(unique)), default=0)
        out[rid] = rid[: max(SHORT_ID_LEAST, shared + 1)]
    return out


def short_path(name: str) -> str:
    """A model or agent given as a local folder, as a table cell shows it: ``…/`` and the folder's own name (the
    record keeps the whole path); a hub id (``Qwen/Qwen2.5-0.5B``) or a name as it is.

    >>> short_path("/data/checkpoints/run-7/Qwen2.5-0.5B-sft"), short_path("Qwen/Qwen2.5-0.5B")
    ('…/Qwen2.5-0.5B-sft', 'Qwen/Qwen2.5-0.5B')
    """
    stripped = name.rstrip("/")
    if name.startswith(("/", "~", "./", "../")) and "/" in stripped.lstrip("./~")[1:]:
        return "…/" + stripped.rsplit("/", 1)[-1]
    return name


def _common(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def as_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    return float(value) if is_number(value) else None


def as_pair(value: Any) -> tuple[float, float] | None:
    """``value`` as an interval ``(low, high)`` when it is a pair of numbers, else None."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(is_number(v) for v in value):
        return float(value[0]), float(value[1])
    return None


#: a finished run's result in words that mean what they say (the dashboard's badge, ``autorl results``' status):
#: its headline interval lies above 0, below 0, or across it; or it has no test score (``success`` false)
BEAT_BASELINE = "beat baseline"
BELOW_BASELINE = "below baseline"
NO_CLEAR_CHANGE = "no clear change"
NO_TEST_SCORE = "no test score"
OUTCOMES = (BEAT_BASELINE, NO_CLEAR_CHANGE, BELOW_BASELINE, NO_TEST_SCORE)


def outcome(row: Mapping[str, Any]) -> str:
    """What a finished run's row says of its result, one of :data:`OUTCOMES`: ``success`` alone (the reference
    harness's column: "finished with a test score") says nothing of a gain, so a run at -18 points never reads
    as one."""
    if row.get("headline_rule"):  # a judge's standing flag made the headline the base model's: no change
        return NO_CLEAR_CHANGE
    if not row.get("success") or as_number(row.get("improvement")) is None:
        return NO_TEST_SCORE
    if row.get("beat_baseline") is True or (
        row.get("beat_baseline") is None and beat_baseline(row.get("improvement_ci95"))
    ):
        return BEAT_BASELINE
    ci = as_pair(row.get("improvement_ci95"))
    return BELOW_BASELINE if ci is not None and ci[1] < 0 else NO_CLEAR_CHANGE


def beat_baseline(improvement_ci95: Any) -> bool:
    """Whether a headline improvement's 95% interval lies above 0 (None or a malformed interval: no)."""
    ok = isinstance(improvement_ci95, list | tuple) and len(improvement_ci95) == 2
    low = improvement_ci95[0] if ok else None
    return isinstance(low, int | float) and not isinstance(low, bool) and low > 0


def _one(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def run_repr(r: Any) -> str:
    """One line for a run's result (:class:`~autorl.record.result.RunResult`): who, what, and the test headline."""
    score = "no test score" if r.test_score is None else f"test {_one(r.test_baseline)} -> {_one(r.test_score)}"
    return (
        f"<RunResult {r.run_id} {r.task} agent={r.agent_name} model={r.model}: {score}, "
        f"improvement {fmt_signed(r.improvement)} {fmt_ci(r.improvement_ci95)}, p={fmt_p(r.p_value)}, k={r.k}>"
    )


def run_html(r: Any) -> str:
    """A run's result as a notebook shows it: the headline table (test and dev side by side), its score
    trajectory (the dashboard's figure, :func:`autorl.record.charts.timeline_svg`) and its dev scores."""
    from html import escape

    rows = [
        ("", "test (the result)", f"dev (best of {r.k}, optimistic)"),
        ("baseline", _one(r.test_baseline), _one(r.dev_baseline)),
        ("score", _one(r.test_score), _one(r.dev_best)),
        ("improvement", fmt_signed(r.improvement), fmt_signed(r.dev_improvement)),
        ("95% CI", fmt_ci(r.improvement_ci95), fmt_ci(r.dev_improvement_ci95)),
        ("p", fmt_p(r.p_value), "-"),
    ]
    cells = "".join(
        "<tr>" + "".join(f"<{t}>{escape(c)}</{t}>" for t, c in zip(("th", "td", "td"), row, strict=True)) + "</tr>"
        for row in rows
    )
    scored = [
        s for s in r.submissions if isinstance(s, dict) and s.get("status") == "done" and is_number(s.get("score"))
    ]
    trail = ", ".join(f"#{s.get('submission_id')}: {float(s['score']):.1f}" for s in scored[:50])
    return (
        f"<div><b>run {escape(str(r.run_id))}</b>: {escape(r.agent_name)} on {escape(r.task)} "
        f"({escape(r.model)})<table>{cells}</table>{_trajectory(r)}"
        f"<p>dev scores by submission: {escape(trail) or 'none'}</p></div>"
    )


def _trajectory(r: Any) -> str:
    """The run's score trajectory as inline SVG; nothing when its record cannot be drawn (a notebook view never
    raises over a malformed record)."""
    from autorl.record import charts
    from autorl.record.timeline import timeline_of_result

    try:
        title = f"{r.agent_name} on {r.task}: dev score per submission"
        return charts.timeline_svg(timeline_of_result(r.to_dict()), title)
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""
