"""Figures as standalone SVG from plain data: the dashboard's pages, a run's ``trajectory.svg`` and a notebook's
view of a run draw through the same functions, and the files are exported as they are for papers. A run's
timeline is drawn from the data :mod:`autorl.record.timeline` builds.

Pure functions of dicts (the standard library only), so any layer can draw without the dashboard's stack.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autorl.record.aggregate import AgentComparison, GroupRecord
    from autorl.record.timeline import Point, Timeline

__all__ = ["compare_svg", "nice_ticks", "tick_label", "timeline_svg"]


FONT = "font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"
STYLE = f"""<style>
text {{ {FONT}; font-size: 12px; fill: #333; }}
.axis line, .axis path {{ stroke: #888; }}
.grid line {{ stroke: #e6e6e6; }}
.title {{ font-size: 14px; font-weight: 600; }}
.muted {{ fill: #777; }}
</style>"""


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round values (steps of 1, 2, 2.5 or 5 times a power of ten) from ``lo`` to ``hi``."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 0.001:
        if v >= lo - step * 0.001:
            ticks.append(round(v, 10))
        v += step
    return ticks


def tick_label(v: float) -> str:
    """An axis value as shown: whole numbers without decimals, others with one."""
    return f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.1f}"


def _fmt_time(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


#: how a submission was evaluated, as its tooltip tells it: the engine, then each time it has
_HOW_TIMES = ("wake_s", "load_s", "generate_s", "sleep_s")


def _how(p: Point) -> str:
    """How a submission was evaluated, for its tooltip (the engine, then each time it has)."""
    if not p.get("engine"):
        return ""
    times = ", ".join(f"{k[:-2]} {t:.1f} s" for k in _HOW_TIMES if isinstance(t := p.get(k), int | float))
    return f"; engine {p['engine']}" + (f" ({times})" if times else "")


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(label)}">{STYLE}'
        f'<rect width="100%" height="100%" fill="#fff"/>' + "".join(body) + "</svg>"
    )


def timeline_svg(tl: Timeline, title: str = "", width: int = 760, height: int = 380) -> str:
    """Dev score of each submission over the agent's wall time; baseline with its 95% band; best so far;
    the test score of the best submission at the end; the deadline."""
    left, right, top, bottom = 56, 150, 34, 44
    pw, ph = width - left - right, height - top - bottom
    # each submission placed at its time, and the scored ones with their score
    placed = [(p, t) for p in tl.get("points", []) if (t := p.get("t_s")) is not None]
    scored = [(p, t, s) for p, t in placed if (s := p.get("score")) is not None]
    base = tl.get("baseline")
    base_score, base_ci = (base.get("score"), base.get("ci95")) if base else (None, None)
    test = tl.get("test")
    elapsed = tl.get("elapsed_s")
    values = [s for _, _, s in scored] + [v for p, _, _ in scored for v in (p.get("ci95") or [])]
    if base_score is not None:
        values += [base_score, *(base_ci or [])]
    if test:
        values += [test["score"], *(test.get("ci95") or [])]
        if isinstance(test_base := test.get("baseline_score"), int | float):
            values.append(test_base)
    y_lo = max(0.0, min(values, default=0.0) - 5)
    y_hi = min(100.0, max(values, default=100.0) + 5) if values else 100.0
    if y_hi - y_lo < 10:
        y_hi = min(100.0, y_lo + 10)
        y_lo = max(0.0, y_hi - 10)
    horizon = float(tl.get("timeout_s") or 0) or max((t for _, t in placed), default=60.0) * 1.1 or 60.0
    horizon = max(horizon, max((p.get("scored_t_s") or 0 for p, _ in placed), default=0.0), 1.0)

    def x(t: float) -> float:
        return left + pw * max(0.0, min(t, horizon)) / horizon

    def y(v: float) -> float:
        return top + ph * (1 - (v - y_lo) / (y_hi - y_lo))

    body = [f'<text class="title" x="{left}" y="20">{escape(title or "dev score per submission")}</text>']
    body.append('<g class="grid">')
    for v in nice_ticks(y_lo, y_hi):
        body.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>')
    body.append("</g>")
    # the baseline and its 95% interval
    if base_score is not None:
        if base_ci:
            body.append(
                f'<rect id="baseline-band" x="{left}" y="{y(base_ci[1]):.1f}" width="{pw}" '
                f'height="{max(1.0, y(base_ci[0]) - y(base_ci[1])):.1f}" fill="#9aa5b1" fill-opacity="0.18"/>'
            )
        body.append(
            f'<line id="baseline" x1="{left}" x2="{left + pw}" y1="{y(base_score):.1f}" '
            f'y2="{y(base_score):.1f}" stroke="#52606d" stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        body.append(
            f'<text x="{left + pw + 6}" y="{y(base_score) + 4:.1f}" class="muted">dev baseline '
            f"{tick_label(base_score)}</text>"
        )
    # the deadline
    if tl.get("timeout_s"):
        body.append(
            f'<line id="deadline" x1="{x(horizon):.1f}" x2="{x(horizon):.1f}" y1="{top}" y2="{top + ph}" '
            f'stroke="#c0392b" stroke-width="1" stroke-dasharray="2 3"/>'
        )
    if elapsed is not None:
        body.append(
            f'<line id="now" x1="{x(elapsed):.1f}" x2="{x(elapsed):.1f}" y1="{top}" '
            f'y2="{top + ph}" stroke="#2b8a3e" stroke-width="1"/>'
        )
    # best so far, as a step line over the times the scores came back
    best: float | None = None
    steps: list[tuple[float, float]] = []
    for p, submitted, score in sorted(scored, key=lambda d: d[0].get("scored_t_s") or d[1]):
        t = p.get("scored_t_s") or submitted
        if best is None or score > best:
            if best is not None:
                steps.append((t, best))
            best = score
            steps.append((t, best))
    if steps:
        end_t = float(elapsed) if elapsed is not None else horizon
        steps.append((max(steps[-1][0], end_t), steps[-1][1]))
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(steps))
        body.append(
            f'<path class="best-line" d="{path}" fill="none" stroke="#1c7ed6" stroke-width="2" stroke-opacity="0.55"/>'
        )
    # each submission: its score with the 95% interval, at the time it was submitted
    for p, t, score in scored:
        cx, cy = x(t), y(score)
        ci = p.get("ci95")
        if ci:
            body.append(
                f'<line class="ci" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(ci[0]):.1f}" y2="{y(ci[1]):.1f}" '
                f'stroke="#1c7ed6" stroke-opacity="0.5"/>'
            )
        sid = escape(str(p["submission_id"]))
        body.append(
            f'<circle class="point" data-submission="{sid}" cx="{cx:.1f}" cy="{cy:.1f}" r="4.5" '
            f'fill="#1c7ed6"><title>submission {sid}: {score:.2f} at '
            f"{_fmt_time(t)}{escape(_how(p))}</title></circle>"
        )
    for p, t in placed:
        if p.get("score") is None:
            body.append(
                f'<circle class="pending" cx="{x(t):.1f}" cy="{top + ph - 6}" r="4" fill="none" '
                f'stroke="#868e96"><title>submission {escape(str(p["submission_id"]))}: {escape(str(p.get("status")))}</title></circle>'
            )
    if test:
        tx, ty = left + pw + 24, y(test["score"])
        ci = test.get("ci95")
        if ci:
            body.append(f'<line x1="{tx}" x2="{tx}" y1="{y(ci[0]):.1f}" y2="{y(ci[1]):.1f}" stroke="#e8590c"/>')
        body.append(
            f'<path id="test-score" d="M{tx},{ty - 7:.1f} L{tx + 7},{ty:.1f} L{tx},{ty + 7:.1f} '
            f'L{tx - 7},{ty:.1f} Z" fill="#e8590c"><title>test score {test["score"]:.2f}</title></path>'
        )
        body.append(f'<text x="{tx + 12}" y="{ty + 4:.1f}">test {tick_label(test["score"])}</text>')
        tb = test.get("baseline_score")
        if isinstance(tb, int | float) and not isinstance(tb, bool):  # the test point's own reference, not dev's
            by = y(float(tb))
            body.append(
                f'<line id="test-baseline" x1="{tx - 10}" x2="{tx + 10}" y1="{by:.1f}" y2="{by:.1f}" '
                f'stroke="#e8590c" stroke-width="2" stroke-dasharray="3 2"><title>test baseline '
                f"{float(tb):.2f}</title></line>"
            )
            body.append(
                f'<text x="{tx + 12}" y="{by + 4:.1f}" class="muted">test baseline {tick_label(float(tb))}</text>'
            )
    # axes
    body.append(
        f'<g class="axis"><line x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}"/>'
        f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}"/></g>'
    )
    for v in nice_ticks(y_lo, y_hi):
        body.append(f'<text x="{left - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{tick_label(v)}</text>')
    for t in nice_ticks(0, horizon, 6):
        body.append(f'<text x="{x(t):.1f}" y="{top + ph + 18}" text-anchor="middle">{_fmt_time(t)}</text>')
    body.append(
        f'<text x="{left + pw / 2:.0f}" y="{height - 6}" text-anchor="middle" class="muted">time since the '
        f"agent started</text>"
    )
    body.append(
        f'<text transform="translate(14,{top + ph / 2:.0f}) rotate(-90)" text-anchor="middle" '
        f'class="muted">score (%)</text>'
    )
    if not scored:
        body.append(
            f'<text x="{left + pw / 2:.0f}" y="{top + ph / 2:.0f}" text-anchor="middle" class="muted">'
            f"no scored submission yet</text>"
        )
    return _svg(width, height, body, title or "submission timeline")


def _group_label(g: GroupRecord) -> str:
    cfg = str(g.get("config_hash") or "")
    budget = g.get("timeout_s")
    return (
        f"{g['agent']} · {g['base_model']}"
        + (f" · {cfg[:8]}" if cfg else "")
        + (f" · {budget:g} s" if isinstance(budget, int | float) else "")
    )


def compare_svg(cmp: AgentComparison, width: int = 860) -> str:
    """Mean held-out test improvement per (agent, base model, config) group with its 95% interval over runs
    (failed runs counted as 0), and each run as a dot."""
    groups = cmp.get("groups", [])
    row_h, top, bottom, left, right = 34, 40, 46, 290, 40
    height = top + bottom + row_h * max(1, len(groups))
    pw = width - left - right
    values = [v for g in groups for v in g["values"]] + [v for g in groups for v in (g["ci95"] or [])] + [0.0]
    lo, hi = min(values), max(values)
    pad = max(1.0, (hi - lo) * 0.08)
    lo, hi = lo - pad, hi + pad

    def x(v: float) -> float:
        return float(left + pw * (v - lo) / (hi - lo))

    # the title starts at the left edge, not over the plot: from there it ran past the figure's right edge
    body = [
        f'<text class="title" x="10" y="22">{escape(str(cmp.get("task", "")))}: held-out test improvement '
        f"(mean, 95% CI over runs; failed runs count as 0)</text>",
        '<g class="grid">',
    ]
    for v in nice_ticks(lo, hi, 6):
        body.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top}" y2="{top + row_h * len(groups)}"/>')
    body.append("</g>")
    body.append(
        f'<line id="zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{top - 4}" y2="{top + row_h * len(groups) + 4}" '
        f'stroke="#333" stroke-width="1.2"/>'
    )
    for i, g in enumerate(groups):
        cy = top + row_h * i + row_h / 2
        label = escape(_group_label(g)[:60])
        failed = f", {g['failures']} failed" if g["failures"] else ""
        body.append(
            f'<text x="{left - 10}" y="{cy + 4:.1f}" text-anchor="end">{label} '
            f'<tspan class="muted">(n={g["runs"]}{failed})</tspan></text>'
        )
        x0, x1 = sorted((x(0), x(g["mean"])))
        color = "#2f9e44" if g["mean"] >= 0 else "#e03131"
        body.append(
            f'<rect class="bar" data-agent="{escape(str(g["agent"]))}" x="{x0:.1f}" y="{cy - 9:.1f}" '
            f'width="{max(1.0, x1 - x0):.1f}" height="18" fill="{color}" fill-opacity="0.75">'
            f"<title>{label}: mean {g['mean']:.2f}</title></rect>"
        )
        if g["ci95"]:
            c0, c1 = x(g["ci95"][0]), x(g["ci95"][1])
            body.append(
                f'<path class="errorbar" d="M{c0:.1f},{cy:.1f} L{c1:.1f},{cy:.1f} M{c0:.1f},{cy - 6:.1f} '
                f'L{c0:.1f},{cy + 6:.1f} M{c1:.1f},{cy - 6:.1f} L{c1:.1f},{cy + 6:.1f}" stroke="#212529" '
                f'stroke-width="1.5" fill="none"/>'
            )
        for v in g["values"]:
            body.append(
                f'<circle class="run" cx="{x(v):.1f}" cy="{cy:.1f}" r="2.5" fill="#212529" fill-opacity="0.6"/>'
            )
    base_y = top + row_h * len(groups)
    for v in nice_ticks(lo, hi, 6):
        body.append(f'<text x="{x(v):.1f}" y="{base_y + 18}" text-anchor="middle">{tick_label(v)}</text>')
    body.append(
        f'<text x="{left + pw / 2:.0f}" y="{height - 8}" text-anchor="middle" class="muted">'
        f"test improvement over the test baseline (percentage points)</text>"
    )
    if not groups:
        body.append(
            f'<text x="{left + pw / 2:.0f}" y="{top + 20}" text-anchor="middle" class="muted">no finished run</text>'
        )
    return _svg(width, height, body, f"{cmp.get('task', '')} comparison")
