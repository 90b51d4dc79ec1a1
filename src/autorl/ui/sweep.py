"""The dashboard's sweep pages: ``/sweeps`` lists the studies under ``AUTORL_HOME/sweeps``, ``/sweeps/{name}``
draws one (rows task x model, agents across; each cell its runs as dots placed by held-out test improvement,
linking to ``/runs/<run_id>``, the mean with its 95% t-interval, failed runs counted), ``/api/sweeps`` and
``/api/sweeps/{name}`` are the same as JSON (:func:`autorl.sweep.report.sweep_page_data`).

A study is read only through :mod:`autorl.ui.studies` (as hostile input); every name and number drawn here is
escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from autorl.record.charts import nice_ticks, tick_label
from autorl.sweep.report import sweep_page_data
from autorl.ui.shell import fmt, is_num, layout, not_found
from autorl.ui.studies import list_studies, load_study

__all__ = ["routes", "study_list_page", "sweep_page"]


CSS = """
table.grid td { vertical-align: top; white-space: normal; } table.grid th.row { font-weight: 600; }
.cell { margin: 2px 0 8px; } .cell svg { display: block; } .cell .nums { font-size: 12px; }
.cell .failed { color: #c92a2a; } .cfg { font-family: ui-monospace,monospace; font-size: 11px; }
"""
STRIP_W, STRIP_H, PAD = 240, 34, 10


def _scale(data: dict[str, Any]) -> tuple[float, float]:
    """One x range for every cell of the page (so that cells compare by eye), 0 always inside."""
    values = [0.0]
    for row in data["rows"]:
        for a in row["agents"]:
            values += [d["value"] for d in a["dots"]] + ([*a["ci95"]] if a.get("ci95") else []) + [a["mean"]]
    values = [float(v) for v in values if is_num(v)]
    lo, hi = min(values), max(values)
    pad = max(1.0, (hi - lo) * 0.08)
    return lo - pad, hi + pad


def _run_href(href: str) -> str:
    return "/runs/" + quote(href.removeprefix("/runs/"), safe="")


def _strip(a: dict[str, Any], lo: float, hi: float) -> str:
    """One cell's figure: the runs as dots (linking to their pages), the mean and its interval, zero."""

    def x(v: float) -> float:
        return PAD + (STRIP_W - 2 * PAD) * (v - lo) / (hi - lo)

    mid = STRIP_H / 2
    body = [f'<line class="zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="2" y2="{STRIP_H - 2}" stroke="#adb5bd"/>']
    for i, d in enumerate(a["dots"]):
        cy = mid + (i % 5 - 2) * 3.0  # a little vertical spread so that equal values stay visible
        # green only for a run whose own interval is above 0; grey for one scored on test without that
        ok, beat = bool(d.get("success")), bool(d.get("beat_baseline"))
        fill = (
            'fill="#2b8a3e" fill-opacity="0.8"'
            if beat
            else 'fill="#868e96" fill-opacity="0.8"'
            if ok
            else 'fill="#fff" stroke="#e03131" stroke-width="1.5"'
        )
        label = f"seed {d.get('seed')}: {d['value']:+.2f}" + (
            " (beat baseline)" if beat else " (no clear gain)" if ok else " (no test score: counted as 0)"
        )
        body.append(
            f'<a href="{escape(_run_href(str(d.get("href", ""))))}"><circle class="run{"" if ok else " failed"}"'
            f' cx="{x(float(d["value"])):.1f}" cy="{cy:.1f}" r="4" {fill}><title>{escape(label)}</title>'
            "</circle></a>"
        )
    # the mean and its interval over the dots, letting clicks through to the runs under them
    ci = a.get("ci95")
    if ci and all(is_num(v) for v in ci):
        c0, c1 = x(ci[0]), x(ci[1])
        body.append(
            f'<path class="interval" d="M{c0:.1f},{mid} L{c1:.1f},{mid} M{c0:.1f},{mid - 7} L{c0:.1f},'
            f'{mid + 7} M{c1:.1f},{mid - 7} L{c1:.1f},{mid + 7}" stroke="#212529" stroke-width="1.5" '
            f'fill="none" pointer-events="none"/>'
        )
    if is_num(a.get("mean")):
        m = x(a["mean"])
        body.append(
            f'<rect class="mean" x="{m - 2:.1f}" y="{mid - 11}" width="4" height="22" fill="#1c7ed6" '
            'pointer-events="none"/>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {STRIP_W} {STRIP_H}" width="{STRIP_W}" '
        f'height="{STRIP_H}" role="img" aria-label="runs">'
        f'<rect width="100%" height="100%" fill="#fff"/>{"".join(body)}</svg>'
    )


def _axis(lo: float, hi: float) -> str:
    def x(v: float) -> float:
        return PAD + (STRIP_W - 2 * PAD) * (v - lo) / (hi - lo)

    ticks = "".join(
        f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="14" y2="20" stroke="#888"/><text x="{x(v):.1f}" '
        f'y="11" text-anchor="middle" font-size="10" fill="#555">{tick_label(v)}</text>'
        for v in nice_ticks(lo, hi, 5)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {STRIP_W} 20" width="{STRIP_W}" height="20">'
        f'<line x1="{PAD}" x2="{STRIP_W - PAD}" y1="19" y2="19" stroke="#888"/>{ticks}</svg>'
    )


def _cell(a: dict[str, Any], lo: float, hi: float, several: bool) -> str:
    failed = f' · <span class="failed">{int(a["failures"])} failed</span>' if a.get("failures") else ""
    cfg = f'<div class="cfg">config {escape(str(a.get("config_hash") or "")[:12])}</div>' if several else ""
    ci = a.get("ci95")
    ci_attr = ",".join(repr(float(v)) for v in ci) if ci else ""
    ci_html = fmt(ci, "ci")
    if ci and len(ci) == 2 and ci[0] == ci[1]:  # equal runs: no spread over runs, not certainty
        halves = [
            (float(d["run_ci95"][1]) - float(d["run_ci95"][0])) / 2
            for d in a.get("dots", [])
            if isinstance(d.get("run_ci95"), list) and len(d["run_ci95"]) == 2 and all(is_num(v) for v in d["run_ci95"])
        ]
        ci_html = escape(
            "no spread over runs (equal improvements)"
            + (f"; each run's own interval ±{max(halves):.1f}" if halves else "")
        )
    return (
        f'<div class="cell" data-agent="{escape(str(a["agent"]))}" data-config="{escape(str(a.get("config_hash")))}"'
        f' data-mean="{escape(repr(float(a["mean"])))}" data-ci="{escape(ci_attr)}">{cfg}{_strip(a, lo, hi)}'
        f'<div class="nums">mean <b class="mean-text">{fmt(float(a["mean"]))}</b> '
        f'<span class="ci-text">{ci_html}</span> · '
        f"n={int(a['runs'])}{failed}</div></div>"
    )


def _missing_status(m: dict[str, Any]) -> str:
    status = str(m.get("status"))
    if status in ("done", "failed"):  # an outcome says result, but its result.json could not be read safely
        return f"{status}; its result.json is not readable (a link, too large or malformed)"
    return status


def sweep_page(data: dict[str, Any], *, nonce: str = "") -> str:
    """The study's grid: rows task x model, agents across (``data`` from :func:`sweep_page_data`)."""
    name = str(data["sweep"])
    missing: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for m in data["missing"]:
        missing.setdefault((str(m.get("task")), str(m.get("model")), str(m.get("agent"))), []).append(m)
    rows = {(str(r["task"]), str(r["model"])): r for r in data["rows"]}
    for task, model, _ in missing:
        rows.setdefault((task, model), {"task": task, "model": model, "agents": []})
    agents = sorted({str(a["agent"]) for r in rows.values() for a in r["agents"]} | {k[2] for k in missing})
    lo, hi = _scale(data)
    head = "".join(f"<th>{escape(a)}<br>{_axis(lo, hi)}</th>" for a in agents)
    trs = []
    for (task, model), row in sorted(rows.items()):
        tds = []
        for agent in agents:
            mine = [a for a in row["agents"] if str(a["agent"]) == agent]
            inner = "".join(_cell(a, lo, hi, len(mine) > 1) for a in mine)
            waiting = missing.get((task, model, agent), [])
            if waiting:
                states = sorted({str(m.get("status")) for m in waiting})
                inner += (
                    f'<div class="muted pending">{len(waiting)} without a result ({escape(", ".join(states))})</div>'
                )
            tds.append(f"<td>{inner or '&ndash;'}</td>")
        trs.append(
            f'<tr><th class="row">{escape(task)}<br><span class="muted">{escape(model)}</span></th>{"".join(tds)}</tr>'
        )
    grid = (
        (
            f'<table class="grid" id="grid"><thead><tr><th>task / base model</th>{head}</tr></thead>'
            f"<tbody>{''.join(trs)}</tbody></table>"
        )
        if rows
        else "<p class='muted'>no cells</p>"
    )
    cmp_rows = "".join(
        f"<tr><td>{escape(str(c['task']))}</td><td>{escape(str(c['base_model']))}</td><td>{escape(str(c['agent_a']))}"
        f" &minus; {escape(str(c['agent_b']))}</td><td class='num'>{int(c['pairs'])}</td>"
        f"<td class='num'>{fmt(float(c['mean_difference']))}</td><td class='num'>{fmt(c['ci95'], 'ci')}"
        "</td></tr>"
        for c in data["comparisons"]
    )
    cmp = (
        (
            f"<h2>Agent against agent, paired by seed</h2><table id='comparisons'><thead><tr><th>task</th>"
            f"<th>base model</th><th>pair</th><th>seeds</th><th>mean difference</th><th>95% CI</th></tr></thead>"
            f"<tbody>{cmp_rows}</tbody></table>"
        )
        if cmp_rows
        else ""
    )
    miss_rows = "".join(
        f"<tr><td>{escape(str(m.get('agent')))}</td><td>{escape(str(m.get('task')))}</td>"
        f"<td>{escape(str(m.get('model')))}</td><td>{escape(str(m.get('seed')))}</td>"
        f"<td>{escape(_missing_status(m))}</td>"
        f"<td>{escape('; '.join(str(r)[:300] for r in (m.get('reasons') or [])[:5]))}</td></tr>"
        for m in data["missing"]
    )
    miss = (
        (
            f"<h2>Without a result yet</h2><table id='missing'><thead><tr><th>agent</th><th>task</th><th>model</th>"
            f"<th>seed</th><th>status</th><th>infrastructure failures</th></tr></thead><tbody>{miss_rows}</tbody>"
            "</table>"
        )
        if miss_rows
        else ""
    )
    rule = (
        f"<p class='note' id='failure-rule'>Each dot is a run (its page on a click), placed by its held-out test "
        f"improvement (percentage points); the blue bar is the mean over seeds, the black line its 95% "
        f"t-interval. Failures: {escape(str(data['failure_rule']))}. Cells whose runs differ in config hash "
        f"are never pooled. Reload to update.</p>"
    )
    body = (
        f"<style>{CSS}</style><h1>Sweep {escape(name)}</h1><p><a href='/sweeps'>all sweeps</a> · "
        f"<a href='/api/sweeps/{escape(quote(name, safe=''))}'>JSON</a></p>{rule}{grid}{cmp}{miss}"
    )
    return layout(f"sweep {name}", body, nonce=nonce)


def study_list_page(studies: list[dict[str, Any]], root: Path, *, nonce: str = "") -> str:
    """The studies found in the sweeps folder, each with how many keys are done, failed, running, waiting."""
    states = ("done", "failed", "running", "queued", "gave up")
    trs = "".join(
        f"<tr data-sweep='{escape(s['sweep'])}'><td><a href='/sweeps/{escape(quote(s['sweep'], safe=''))}'>"
        f"{escape(s['sweep'])}</a></td><td>{escape(', '.join(s['tasks']))}</td><td>{escape(', '.join(s['agents']))}"
        f"</td><td class='num'>{int(s['cells'])}</td>"
        + "".join(f"<td class='num'>{int(s['counts'].get(k, 0))}</td>" for k in states)
        + "</tr>"
        for s in studies
    )
    body = (
        f"<h1>Sweeps <span class='muted'>({len(studies)})</span></h1><p class='note'>the studies in "
        f"{escape(str(root))} (<code>autorl sweep run</code>; a study kept elsewhere with <code>--dir</code> "
        "is not listed).</p>"
        + (
            "<table id='sweeps'><thead><tr><th>sweep</th><th>tasks</th><th>agents</th><th>runs</th>"
            + "".join(f"<th>{k}</th>" for k in states)
            + f"</tr></thead><tbody>{trs}</tbody></table>"
            if studies
            else "<p class='muted'>no sweeps yet</p>"
        )
    )
    return layout("sweeps", body, nonce=nonce)


def routes(root: Path, secure: Callable[[Response], Response]) -> list[Route]:
    """The sweep routes over the sweeps folder ``root``; ``secure`` adds the dashboard's security headers."""

    def no_sweep(name: str) -> Response:
        return secure(HTMLResponse(not_found(f"no sweep {name}"), status_code=404))

    def list_html(request: Request) -> Response:
        return secure(HTMLResponse(study_list_page(list_studies(root), root)))

    def list_json(request: Request) -> Response:
        return secure(JSONResponse(list_studies(root)))

    def page_html(request: Request) -> Response:
        name = request.path_params["name"]
        study = load_study(root, name)
        return secure(HTMLResponse(sweep_page(sweep_page_data(study)))) if study else no_sweep(name)

    def page_json(request: Request) -> Response:
        name = request.path_params["name"]
        study = load_study(root, name)
        if study is None:
            return secure(JSONResponse({"error": f"no sweep {name}"}, status_code=404))
        return secure(JSONResponse(sweep_page_data(study)))

    return [
        Route("/sweeps", list_html),
        Route("/sweeps/{name}", page_html),
        Route("/api/sweeps", list_json),
        Route("/api/sweeps/{name}", page_json),
    ]
