"""HTML pages: server-rendered, inline CSS and a few lines of inline JS, nothing fetched from elsewhere.

The runs and compare pages, each a function over :mod:`autorl.ui.data`'s plain data in the shell of
:mod:`autorl.ui.shell`; one run's page is :mod:`autorl.ui.run_page`, the sweep pages are :mod:`autorl.ui.sweep`."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from autorl.record.aggregate import FAILURE_RULE, AgentComparison
from autorl.ui.audit import audit_cell
from autorl.ui.data import RUN_COLUMNS, TableRow
from autorl.ui.shell import fmt, layout, status_badge

TABLE_JS = """
(function () {
  const body = document.getElementById('runs-body');
  if (!body || body.dataset.live !== '1') return;
  async function tick() {
    try {
      const r = await fetch('/fragment/runs' + location.search, {cache: 'no-store'});
      if (r.ok) { const html = await r.text(); if (html !== body.innerHTML) body.innerHTML = html;
        body.dataset.live = body.querySelector('.status-running') ? '1' : '0'; }
    } catch (e) {}
    if (body.dataset.live === '1') setTimeout(tick, 3000);
  }
  setTimeout(tick, 3000);
})();
"""


def sandbox_badge(mode: Any) -> str:
    """The sandbox mode; a run without one is marked, since its agent could reach everything the user can."""
    if mode is None:
        return "&ndash;"
    if str(mode) == "none":
        return '<span class="sandbox-none" title="the agent ran without a sandbox">none ⚠</span>'
    return escape(str(mode))


def dev_cell(row: TableRow) -> str:
    if row.get("dev_improvement") is None:
        return "&ndash;"
    k = row.get("dev_k")
    return f"{fmt(row.get('dev_improvement'))}{f' <span class=muted>(k={fmt(k)})</span>' if k is not None else ''}"


def run_rows_html(rows: list[TableRow]) -> str:
    out = []
    for r in rows:
        cells = []
        for key, _, kind in RUN_COLUMNS:
            value = r.get(key)
            if key == "status":
                cell = status_badge(str(value))
                flags = r.get("audit_flags")
                if flags:
                    names = ", ".join(str(f) for f in flags) if isinstance(flags, list) else str(flags)
                    cell += f' <span class="flag" title="{escape(names)}">⚑</span>'
                cells.append(f"<td>{cell}</td>")
            elif key == "run_id":
                cells.append(
                    f'<td><a href="/runs/{escape(quote(str(r["run_id"]), safe=""))}">{escape(str(value))}</a></td>'
                )
            elif kind == "audit":
                cells.append(f"<td class='audit wrap'>{audit_cell(r)}</td>")
            elif kind == "sandbox":
                cells.append(f"<td>{sandbox_badge(value)}</td>")
            elif kind == "dev":
                cells.append(f'<td class="num">{dev_cell(r)}</td>')
            else:
                # names wrap (a long model id), numbers and the run id never do: the table fits a 1400 px window
                css = ' class="num"' if kind in ("num", "secs") else ' class="wrap"' if kind == "text" else ""
                cells.append(f"<td{css}>{fmt(value, kind)}</td>")
        out.append(f'<tr data-run="{escape(str(r["run_id"]))}">{"".join(cells)}</tr>')
    if not out:
        out.append(f'<tr><td colspan="{len(RUN_COLUMNS)}" class="muted">no runs match</td></tr>')
    return "\n".join(out)


def runs_page(rows: list[TableRow], choices: dict[str, list[str]], params: dict[str, str], *, nonce: str = "") -> str:
    def select(name: str, label: str) -> str:
        opts = "".join(
            f'<option value="{escape(v)}"{" selected" if params.get(name) == v else ""}>{escape(v)}</option>'
            for v in choices.get(name, [])
        )
        return f'<label>{label}<select name="{name}"><option value="">all</option>{opts}</select></label>'

    sort, order = params.get("sort") or "timestamp", params.get("order") or ""
    heads = []
    for key, title, _ in RUN_COLUMNS:
        if key == "improvement_ci95":
            heads.append(f"<th>{escape(title)}</th>")
            continue
        new_order = "asc" if sort == key and order == "desc" else "desc"
        q = {k: v for k, v in params.items() if v and k not in ("sort", "order")} | {"sort": key, "order": new_order}
        arrow = (" ▼" if order == "desc" else " ▲") if sort == key and order else ""
        heads.append(f'<th><a href="/?{escape(urlencode(q))}">{escape(title)}{arrow}</a></th>')
    live = any(r.get("status") == "running" for r in rows)
    body = f"""<h1>Runs <span class="muted">({len(rows)})</span></h1>
<form class="filters" method="get" action="/">{select("task", "task")}{select("agent", "agent")}
{select("model", "base model")}{select("status", "status")}
<label>from<input type="date" name="since" value="{escape(params.get("since", ""))}"></label>
<label>to<input type="date" name="until" value="{escape(params.get("until", ""))}"></label>
<button type="submit">filter</button> <a href="/">clear</a></form>
<p class="note">improvement: the dev-selected checkpoint scored once on the held-out test split, against the test
baseline (a run without a test score has none). dev: the best of k dev scores the agent saw minus the dev
baseline, biased upward by the choice among k.</p>
<table id="runs"><thead><tr>{"".join(heads)}</tr></thead>
<tbody id="runs-body" data-live="{int(live)}">{run_rows_html(rows)}</tbody></table>"""
    return layout("runs", body, TABLE_JS, nonce=nonce)


def compare_page(tasks: list[str], task: str | None, cmp: AgentComparison | None, svg: str, *, nonce: str = "") -> str:
    opts = "".join(f'<option value="{escape(t)}"{" selected" if t == task else ""}>{escape(t)}</option>' for t in tasks)
    table = ""
    if cmp:
        table = (
            "<table id='groups'><thead><tr><th>agent</th><th>base model</th><th>config hash</th><th>time budget</th>"
            "<th>items per split</th><th>sandbox</th><th>runs</th>"
            "<th>failed (counted as 0)</th><th>mean test improvement</th><th>95% CI</th></tr></thead><tbody>"
            + "".join(
                f"<tr><td>{escape(str(g['agent']))}</td><td>{escape(str(g['base_model']))}</td>"
                f"<td>{escape(str(g['config_hash']))}</td><td class='num'>{fmt(g.get('timeout_s'), 'secs')}</td>"
                f"<td class='num'>{'all' if g.get('limit') is None else fmt(g.get('limit'))}</td>"
                f"<td>{fmt(g.get('sandbox'), 'text')}</td><td class='num'>{g['runs']}</td>"
                f"<td class='num'>{g['failures']} ({fmt(g['failure_rate'], 'pct')})</td>"
                f"<td class='num'>{fmt(g['mean'])}</td><td class='num'>{fmt(g['ci95'], 'ci')}</td></tr>"
                for g in cmp["groups"]
            )
            + "</tbody></table>"
            + "".join(
                f"<p class='note differs'>{escape(who)}: not pooled, the runs differ in {escape(', '.join(keys))}</p>"
                for who, keys in cmp.get("differs", {}).items()
            )
        )
    q = urlencode({"task": task or ""})
    rule = (
        f"<p class='note' id='failure-rule'>Metric: the held-out test improvement (percentage points), never "
        f"dev; mean with a 95% t-interval over runs. Failures: {escape(FAILURE_RULE)}. Runs with different base "
        f"models, config hashes, time budgets, item limits or sandboxes are never pooled: each combination is its own "
        f"row.</p>"
    )
    body = f"""<h1>Compare agents</h1>
<form class="filters" method="get" action="/compare"><label>task<select name="task">{opts}</select></label>
<button type="submit">show</button></form>{rule}
{f'<div class="figure" id="compare">{svg}</div><p><a href="/compare.svg?{escape(q)}&amp;download=1">download SVG</a> · <a href="/api/compare?{escape(q)}">JSON</a></p>{table}' if task else '<p class="muted">no runs recorded yet</p>'}"""
    return layout("compare", body, nonce=nonce)
