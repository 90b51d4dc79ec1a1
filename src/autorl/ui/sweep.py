"""The dashboard's sweep pages: ``/sweeps`` lists the studies under ``AUTORL_HOME/sweeps``, ``/sweeps/{name}``
draws one (rows task x model, agents across; each cell its runs as dots placed by held-out test improvement,
linking to ``/runs/<run_id>``, the mean with its 95% t-interval, failed runs counted), ``/api/sweeps`` and
``/api/sweeps/{name}`` are the same as JSON (:func:`autorl.sweep.report.sweep_page_data`).

A study's folder is partly written by its runs (results, outcomes, reasons), so it is read as hostile input:
every file beneath the sweeps folder through :mod:`autorl.untrusted` (no link followed, on the way or at the
end; sizes capped; malformed JSON is a file that is not there), every name and number escaped.

Over 300 lines (some 390): the safe reader of a study folder (links, sizes, malformed rows) and the pages
drawn from what it read are kept together, so that no page reads a study by another way.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from autorl import untrusted
from autorl.sweep.coordinator import DEFAULT_RETRIES, Study
from autorl.sweep.report import sweep_page_data
from autorl.sweep.spec import Cell
from autorl.sweep.store import Attempt, KeyState, SweepDir
from autorl.ui import pages

__all__ = ["list_studies", "load_study", "routes", "study_list_page", "sweep_page"]

#: the largest files read from a study folder (a run's result, the expanded cells, a job or outcome record)
RESULT_LIMIT, CELLS_LIMIT, RECORD_LIMIT = 16 << 20, 32 << 20, 1 << 20
MAX_STUDIES, MAX_ATTEMPTS = 1000, 100
#: a test improvement is a difference of scores in percent; a larger one is a malformed result
MAX_IMPROVEMENT = 1e6
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


def _is_name(text: object) -> bool:
    """A single, plain path component (study names, run keys)."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


@contextlib.contextmanager
def _dir_beneath(base: Path, parts: list[str]) -> Iterator[int | None]:
    """A descriptor of the directory ``base/parts...``, no link followed; None when there is none."""
    fds: list[int] = []
    try:
        try:
            fds.append(os.open(base, _DIR_FLAGS))
            for part in parts:
                fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
        except OSError:
            yield None
            return
        yield fds[-1]
    finally:
        for fd in reversed(fds):
            os.close(fd)


@dataclass
class _SafeAttempt(Attempt):
    """An attempt whose result is read through :mod:`autorl.untrusted`."""

    folder: _SafeSweepDir | None = None

    def result(self) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        data = self.folder.read(f"keys/{self.key}/a{self.number}/result.json", RESULT_LIMIT)
        row = _clean_row(data.get("row")) if isinstance(data, dict) else None
        return {"row": row} if row is not None else None


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _finite(v: Any, bound: float = MAX_IMPROVEMENT) -> bool:
    """A number, finite, at most ``bound`` in size (an integer too large for a float is not)."""
    try:
        return _num(v) and math.isfinite(v) and abs(v) <= bound
    except OverflowError:
        return False


def _clean_row(row: Any) -> dict[str, Any] | None:
    """A result's ledger row with only what the report reads, each of the type it expects; None when the row
    is malformed (no run id, names that are not strings, a seed that is not a scalar, an improvement that is
    not a number in range)."""
    if not isinstance(row, dict):
        return None
    run_id, improvement, ci = row.get("run_id"), row.get("improvement"), row.get("improvement_ci95")
    if not (isinstance(run_id, str) and 0 < len(run_id) <= 200) or not (improvement is None or _finite(improvement)):
        return None
    if not all(isinstance(row.get(k), str) for k in ("task", "agent", "base_model")):
        return None
    if not all(row.get(k) is None or isinstance(row.get(k), str | int) for k in ("seed", "config_hash")):
        return None
    clean = {k: v for k, v in row.items() if v is None or isinstance(v, str | bool | int) or _finite(v, math.inf)}
    clean["improvement_ci95"] = ci if isinstance(ci, list) and len(ci) == 2 and all(_finite(v) for v in ci) \
        else None
    clean["success"] = row.get("success") is True
    clean.pop("live", None)
    return clean


class _SafeSweepDir(SweepDir):
    """A study folder beneath ``base`` read as hostile input (read-only: the dashboard never writes)."""

    def __init__(self, base: Path, name: str) -> None:
        super().__init__(base / name)
        self.base = base

    def read(self, relpath: str, limit: int) -> Any:
        """The JSON at ``relpath`` in the study; None when absent, reached through a link, too large or malformed."""
        try:
            return untrusted.read_json(self.base, f"{self.name}/{relpath}", limit=limit)
        except untrusted.UntrustedFileError:
            return None

    def exists(self) -> bool:
        return isinstance(self.read("sweep.json", RECORD_LIMIT), dict)

    def spec(self) -> dict[str, Any]:
        data = self.read("sweep.json", RECORD_LIMIT)
        spec = data.get("spec") if isinstance(data, dict) else None
        return dict(spec) if isinstance(spec, dict) else {}

    def cells(self) -> list[dict[str, Any]]:
        data = self.read("cells.json", CELLS_LIMIT)
        out = []
        for c in data if isinstance(data, list) else []:
            options = c.get("options") if isinstance(c, dict) else None
            if (isinstance(options, dict) and _is_name(c.get("run_key"))
                    and all(k in options for k in ("agent", "task", "model", "seed"))):
                out.append({"options": options, "run_key": c["run_key"],
                            "identity": c["identity"] if isinstance(c.get("identity"), dict) else {}})
        return out

    def key_state(self, key: str) -> KeyState:
        state = KeyState(key)
        if not _is_name(key):
            return state
        with _dir_beneath(self.base, [self.name, "keys", key]) as fd:
            if fd is None:
                return state
            numbers = []
            for name in os.listdir(fd):
                if name.startswith("a") and name[1:].isdigit() and len(name) < 10:
                    with contextlib.suppress(OSError):
                        if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                            numbers.append(int(name[1:]))
        for n in sorted(numbers)[:MAX_ATTEMPTS]:
            job, outcome = (self.read(f"keys/{key}/a{n}/{f}", RECORD_LIMIT) for f in ("job.json", "outcome.json"))
            state.attempts.append(_SafeAttempt(key, n, self.attempt_dir(key, n),
                                               job if isinstance(job, dict) else None,
                                               outcome if isinstance(outcome, dict) else None, folder=self))
        return state


def load_study(root: Path, name: str) -> Study | None:
    """The study ``name`` in the sweeps folder ``root``, read as hostile input; None when there is none."""
    if not _is_name(name):
        return None
    folder = _SafeSweepDir(root, name)
    if not folder.exists():
        return None
    spec = folder.spec()
    retries = spec.get("retries", DEFAULT_RETRIES)
    retries = retries if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0 \
        else DEFAULT_RETRIES
    cells = [Cell(options=c["options"], run_key=c["run_key"], identity=c["identity"]) for c in folder.cells()]
    study = Study(name, folder, cells, spec, retries)
    study.refresh()
    return study


def list_studies(root: Path) -> list[dict[str, Any]]:
    """Each study folder in ``root`` (a plain directory with a ``sweep.json``): its name, cells and how many
    keys are in each state."""
    try:
        entries = sorted(e.name for e in os.scandir(root) if _is_name(e.name) and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    out = []
    for name in entries[:MAX_STUDIES]:
        study = load_study(root, name)
        if study is not None:
            out.append({"sweep": name, "cells": len(study.cells), "counts": study.counts(),
                        "agents": sorted({str(c["agent"]) for c in study.cells}),
                        "tasks": sorted({str(c["task"]) for c in study.cells})})
    return out


# -- pages ------------------------------------------------------------------------------------------------------

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
    values = [float(v) for v in values if _num(v)]
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
        ok = bool(d.get("success"))
        fill = 'fill="#2b8a3e" fill-opacity="0.8"' if ok else 'fill="#fff" stroke="#e03131" stroke-width="1.5"'
        label = f"seed {d.get('seed')}: {d['value']:+.2f}" + ("" if ok else " (failed: counted as 0)")
        body.append(f'<a href="{escape(_run_href(str(d.get("href", ""))))}"><circle class="run{"" if ok else " failed"}"'
                    f' cx="{x(float(d["value"])):.1f}" cy="{cy:.1f}" r="4" {fill}><title>{escape(label)}</title>'
                    "</circle></a>")
    # the mean and its interval over the dots, letting clicks through to the runs under them
    ci = a.get("ci95")
    if ci and all(_num(v) for v in ci):
        c0, c1 = x(ci[0]), x(ci[1])
        body.append(f'<path class="interval" d="M{c0:.1f},{mid} L{c1:.1f},{mid} M{c0:.1f},{mid - 7} L{c0:.1f},'
                    f'{mid + 7} M{c1:.1f},{mid - 7} L{c1:.1f},{mid + 7}" stroke="#212529" stroke-width="1.5" '
                    f'fill="none" pointer-events="none"/>')
    if _num(a.get("mean")):
        m = x(a["mean"])
        body.append(f'<rect class="mean" x="{m - 2:.1f}" y="{mid - 11}" width="4" height="22" fill="#1c7ed6" '
                    'pointer-events="none"/>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {STRIP_W} {STRIP_H}" width="{STRIP_W}" '
            f'height="{STRIP_H}" role="img" aria-label="runs">'
            f'<rect width="100%" height="100%" fill="#fff"/>{"".join(body)}</svg>')


def _axis(lo: float, hi: float) -> str:
    from autorl.ui.charts import _fmt, _nice_ticks

    def x(v: float) -> float:
        return PAD + (STRIP_W - 2 * PAD) * (v - lo) / (hi - lo)

    ticks = "".join(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="14" y2="20" stroke="#888"/><text x="{x(v):.1f}" '
                    f'y="11" text-anchor="middle" font-size="10" fill="#555">{_fmt(v)}</text>'
                    for v in _nice_ticks(lo, hi, 5))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {STRIP_W} 20" width="{STRIP_W}" height="20">'
            f'<line x1="{PAD}" x2="{STRIP_W - PAD}" y1="19" y2="19" stroke="#888"/>{ticks}</svg>')


def _cell(a: dict[str, Any], lo: float, hi: float, several: bool) -> str:
    failed = f' · <span class="failed">{int(a["failures"])} failed</span>' if a.get("failures") else ""
    cfg = f'<div class="cfg">config {escape(str(a.get("config_hash") or "")[:12])}</div>' if several else ""
    ci = a.get("ci95")
    ci_attr = ",".join(repr(float(v)) for v in ci) if ci else ""
    return (f'<div class="cell" data-agent="{escape(str(a["agent"]))}" data-config="{escape(str(a.get("config_hash")))}"'
            f' data-mean="{escape(repr(float(a["mean"])))}" data-ci="{escape(ci_attr)}">{cfg}{_strip(a, lo, hi)}'
            f'<div class="nums">mean <b class="mean-text">{pages.fmt(float(a["mean"]))}</b> '
            f'<span class="ci-text">{pages.fmt(ci, "ci")}</span> · n={int(a["runs"])}{failed}</div></div>')


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
    head = "".join(f'<th>{escape(a)}<br>{_axis(lo, hi)}</th>' for a in agents)
    trs = []
    for (task, model), row in sorted(rows.items()):
        tds = []
        for agent in agents:
            mine = [a for a in row["agents"] if str(a["agent"]) == agent]
            inner = "".join(_cell(a, lo, hi, len(mine) > 1) for a in mine)
            waiting = missing.get((task, model, agent), [])
            if waiting:
                states = sorted({str(m.get("status")) for m in waiting})
                inner += f'<div class="muted pending">{len(waiting)} without a result ({escape(", ".join(states))})</div>'
            tds.append(f"<td>{inner or '&ndash;'}</td>")
        trs.append(f'<tr><th class="row">{escape(task)}<br><span class="muted">{escape(model)}</span></th>'
                   f'{"".join(tds)}</tr>')
    grid = (f'<table class="grid" id="grid"><thead><tr><th>task / base model</th>{head}</tr></thead>'
            f'<tbody>{"".join(trs)}</tbody></table>') if rows else "<p class='muted'>no cells</p>"
    cmp_rows = "".join(
        f"<tr><td>{escape(str(c['task']))}</td><td>{escape(str(c['base_model']))}</td><td>{escape(str(c['agent_a']))}"
        f" &minus; {escape(str(c['agent_b']))}</td><td class='num'>{int(c['pairs'])}</td>"
        f"<td class='num'>{pages.fmt(float(c['mean_difference']))}</td><td class='num'>{pages.fmt(c['ci95'], 'ci')}"
        "</td></tr>" for c in data["comparisons"])
    cmp = (f"<h2>Agent against agent, paired by seed</h2><table id='comparisons'><thead><tr><th>task</th>"
           f"<th>base model</th><th>pair</th><th>seeds</th><th>mean difference</th><th>95% CI</th></tr></thead>"
           f"<tbody>{cmp_rows}</tbody></table>") if cmp_rows else ""
    miss_rows = "".join(
        f"<tr><td>{escape(str(m.get('agent')))}</td><td>{escape(str(m.get('task')))}</td>"
        f"<td>{escape(str(m.get('model')))}</td><td>{escape(str(m.get('seed')))}</td>"
        f"<td>{escape(_missing_status(m))}</td>"
        f"<td>{escape('; '.join(str(r)[:300] for r in (m.get('reasons') or [])[:5]))}</td></tr>"
        for m in data["missing"])
    miss = (f"<h2>Without a result yet</h2><table id='missing'><thead><tr><th>agent</th><th>task</th><th>model</th>"
            f"<th>seed</th><th>status</th><th>infrastructure failures</th></tr></thead><tbody>{miss_rows}</tbody>"
            "</table>") if miss_rows else ""
    rule = (f"<p class='note' id='failure-rule'>Each dot is a run (its page on a click), placed by its held-out test "
            f"improvement (percentage points); the blue bar is the mean over seeds, the black line its 95% "
            f"t-interval. Failures: {escape(str(data['failure_rule']))}. Cells whose runs differ in config hash "
            f"are never pooled. Reload to update.</p>")
    body = (f"<style>{CSS}</style><h1>Sweep {escape(name)}</h1><p><a href='/sweeps'>all sweeps</a> · "
            f"<a href='/api/sweeps/{escape(quote(name, safe=''))}'>JSON</a></p>{rule}{grid}{cmp}{miss}")
    return pages.layout(f"sweep {name}", body, nonce=nonce)


def study_list_page(studies: list[dict[str, Any]], root: Path, *, nonce: str = "") -> str:
    """The studies found in the sweeps folder, each with how many keys are done, failed, running, waiting."""
    states = ("done", "failed", "running", "queued", "gave up")
    trs = "".join(
        f"<tr data-sweep='{escape(s['sweep'])}'><td><a href='/sweeps/{escape(quote(s['sweep'], safe=''))}'>"
        f"{escape(s['sweep'])}</a></td><td>{escape(', '.join(s['tasks']))}</td><td>{escape(', '.join(s['agents']))}"
        f"</td><td class='num'>{int(s['cells'])}</td>"
        + "".join(f"<td class='num'>{int(s['counts'].get(k, 0))}</td>" for k in states) + "</tr>"
        for s in studies)
    body = (f"<h1>Sweeps <span class='muted'>({len(studies)})</span></h1><p class='note'>the studies in "
            f"{escape(str(root))} (<code>autorl sweep run</code>; a study kept elsewhere with <code>--dir</code> "
            "is not listed).</p>"
            + ("<table id='sweeps'><thead><tr><th>sweep</th><th>tasks</th><th>agents</th><th>runs</th>"
               + "".join(f"<th>{k}</th>" for k in states) + f"</tr></thead><tbody>{trs}</tbody></table>"
               if studies else "<p class='muted'>no sweeps yet</p>"))
    return pages.layout("sweeps", body, nonce=nonce)


def routes(root: Path, secure: Callable[[Response], Response]) -> list[Route]:
    """The sweep routes over the sweeps folder ``root``; ``secure`` adds the dashboard's security headers."""

    def not_found(name: str) -> Response:
        return secure(HTMLResponse(pages.not_found(f"no sweep {name}"), status_code=404))

    def list_html(request: Request) -> Response:
        return secure(HTMLResponse(study_list_page(list_studies(root), root)))

    def list_json(request: Request) -> Response:
        return secure(JSONResponse(list_studies(root)))

    def page_html(request: Request) -> Response:
        name = request.path_params["name"]
        study = load_study(root, name)
        return secure(HTMLResponse(sweep_page(sweep_page_data(study)))) if study else not_found(name)

    def page_json(request: Request) -> Response:
        name = request.path_params["name"]
        study = load_study(root, name)
        if study is None:
            return secure(JSONResponse({"error": f"no sweep {name}"}, status_code=404))
        return secure(JSONResponse(sweep_page_data(study)))

    return [Route("/sweeps", list_html), Route("/sweeps/{name}", page_html), Route("/api/sweeps", list_json),
            Route("/api/sweeps/{name}", page_json)]
