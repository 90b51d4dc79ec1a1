"""HTML pages: server-rendered, inline CSS and a few lines of inline JS, nothing fetched from elsewhere.

The runs, run and compare pages, each a function over :mod:`autorl.ui.data`'s plain data in the shell of
:mod:`autorl.ui.shell`; the sweep pages are :mod:`autorl.ui.sweep`."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from autorl.record.aggregate import FAILURE_RULE, AgentComparison
from autorl.record.metrics import EFFICIENCY_COLUMNS, SCALAR_METRICS
from autorl.ui.audit import audit_cell, audit_html
from autorl.ui.data import RUN_COLUMNS, LogTail, RunDetail, TableRow
from autorl.ui.shell import NOT_SHOWN, fmt, layout, status_badge, untrusted_section
from autorl.ui.trajectory import Trajectory, trajectory_html

LIVE_JS = """
(function () {
  const el = document.getElementById('timeline');
  if (!el || el.dataset.live !== '1') return;
  const id = el.dataset.run;
  async function tick() {
    try {
      const svg = await fetch('/runs/' + encodeURIComponent(id) + '/timeline.svg', {cache: 'no-store'});
      if (svg.ok) el.innerHTML = await svg.text();
      const r = await fetch('/api/runs/' + encodeURIComponent(id), {cache: 'no-store'});
      if (r.ok) {
        const d = await r.json();
        const s = document.getElementById('live-summary');
        if (s) s.textContent = d.row.submissions + ' submission(s), best dev ' +
          (d.row.dev_best === null ? '-' : d.row.dev_best.toFixed(2)) + ', ' + Math.round(d.row.duration_s) + ' s';
        if (!d.live) { location.reload(); return; }
      }
    } catch (e) {}
    setTimeout(tick, 2000);
  }
  setTimeout(tick, 2000);
})();
"""

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


def _meta_list(pairs: list[tuple[str, Any, str]]) -> str:
    """A definition list of (label, value, kind): values formatted and escaped by :func:`fmt`."""
    return (
        '<dl class="meta">'
        + "".join(f"<dt>{escape(k)}</dt><dd>{fmt(v, kind)}</dd>" for k, v, kind in pairs if v not in (None, ""))
        + "</dl>"
    )


def _log_html(name: str, log: LogTail | None) -> str:
    if log is None:
        return "<p class='muted'>none</p>"
    if "error" in log:
        return f"<p class='warning'>{NOT_SHOWN}: {escape(str(log['error']))}</p>"
    cut = "<p class='note'>last part only</p>" if log.get("truncated") else ""
    if log.get("hidden"):
        cut += f"<p class='note'>{fmt(log['hidden'])} polling lines (GET /admin/state) not shown</p>"
    return f"{cut}<pre class='log'>{escape(str(log.get('text') or ''))}</pre>"


def run_page(
    detail: RunDetail,
    timeline_svg: str,
    logs: dict[str, LogTail | None],
    turns: Trajectory | None,
    grader_log: LogTail | None = None,
    *,
    items: str = "",
    nonce: str = "",
) -> str:
    row, result = detail["row"], detail["result"]
    meta = (result.get("meta") if result else None) or {}
    rid = str(detail["run_id"])
    live = detail["live"]
    sandbox: dict[str, Any] = meta["sandbox"] if isinstance(meta.get("sandbox"), dict) else {}
    mode = row.get("sandbox") or sandbox.get("mode")
    headline = [
        ("test baseline", row.get("baseline"), "num"),
        ("test score", row.get("best_score"), "num"),
        ("improvement", row.get("improvement"), "num"),
        ("95% CI", row.get("improvement_ci95"), "ci"),
        ("p value", row.get("p_value"), "p"),
        ("finished with a test score (success)", row.get("success"), "text"),
        ("beat baseline (95% CI above 0)", row.get("beat_baseline"), "text"),
    ]
    no_headline = (
        (f"<p class='note'>no headline: this run has no held-out test score{' yet' if live else ''}.</p>")
        if row.get("improvement") is None
        else ""
    )
    dev = [
        ("k (scored submissions)", row.get("dev_k"), "num"),
        ("dev baseline", row.get("dev_baseline"), "num"),
        ("best dev", row.get("dev_best"), "num"),
        ("dev improvement", row.get("dev_improvement"), "num"),
        ("dev 95% CI", row.get("dev_improvement_ci95"), "ci"),
    ]
    other = [
        ("submissions", row.get("submissions"), "num"),
        ("duration", row.get("duration_s"), "secs"),
        ("end", row.get("end_reason"), "text"),
        *((name.replace("_", " "), row.get(name), "num") for name in EFFICIENCY_COLUMNS),
    ]
    process = [(name.replace("_", " "), row.get(name), "num") for name in SCALAR_METRICS]
    peers = [
        ("best of k on test", row.get("test_best_of_k"), "num"),
        ("k", row.get("test_best_of_k_k"), "num"),
        ("submission", row.get("test_best_of_k_submission"), "num"),
        ("selection gap (minus the headline)", row.get("test_selection_gap"), "num"),
    ]
    network = f" (network {sandbox.get('network')})" if sandbox.get("network") else ""
    about = [
        ("run id", rid, "text"),
        ("task", row.get("task"), "text"),
        ("agent", row.get("agent"), "text"),
        ("base model", row.get("base_model"), "text"),
        ("model source", meta.get("model_source"), "text"),
        ("model revision", meta.get("model_revision"), "text"),
        ("seed", row.get("seed"), "text"),
        ("config hash", row.get("config_hash"), "text"),
        ("backend", meta.get("backend"), "text"),
        ("autorl", meta.get("autorl_version"), "text"),
        ("python", meta.get("python"), "text"),
        ("sandbox", f"{mode}{network}" if mode else None, "text"),
        ("limit", meta.get("limit"), "text"),
        ("workspace", row.get("workspace"), "text"),
    ]
    usage = meta.get("llm_usage")
    if isinstance(usage, dict):
        source = row.get("llm_usage_source") or "agent-reported"
        about += [
            (
                f"llm tokens ({source})",
                f"{fmt(usage.get('prompt_tokens', 0))} in / {fmt(usage.get('completion_tokens', 0))} out",
                "raw",
            ),
            (f"llm cost, USD ({source})", usage.get("cost_usd"), "num"),
            (f"llm steps ({source})", usage.get("steps"), "num"),
        ]
    about_html = (
        _meta_list([p for p in about if p[2] != "raw"]).removesuffix("</dl>")
        + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v, kind in about if kind == "raw")
        + "</dl>"
    )
    sandbox_warning = (
        "<p class='warning'>⚠ this run's agent ran <b>without a sandbox</b>: it could read and "
        "write everything the user running autorl can; treat its numbers with suspicion.</p>"
        if str(mode) == "none"
        else ""
    )
    subs = (result.get("submissions") if result else None) or []
    sub_rows = "".join(
        f"<tr><td>{fmt(s.get('submission_id'))}</td><td>{fmt(s.get('status'))}</td><td class='num'>{fmt(s.get('score'))}</td>"
        f"<td class='num'>{fmt(s.get('ci95'), 'range')}</td><td class='num'>{fmt(s.get('improvement'))}</td>"
        f"<td>{escape(str(s.get('model_path', '')))}</td><td>{escape(str(s.get('error') or ''))}</td></tr>"
        for s in subs
    )
    agent_files = "".join(untrusted_section(f"{name} (tail)", _log_html(name, log)) for name, log in logs.items())
    grader_html = (
        f"<div><h2>grader log (grader's store)</h2>{_log_html('grader', grader_log)}</div>"
        if grader_log is not None
        else ""
    )
    title = f"{row.get('agent')} on {row.get('task')} from {row.get('base_model')}"
    live_line = (
        (
            f'<p><span class="live-dot">●</span> live: <span id="live-summary">{fmt(row.get("submissions"))} '
            f"submission(s)</span> — updates every 2 s</p>"
        )
        if live
        else ""
    )
    if row.get("recover"):
        live_line = (
            f"<p class='warning'>this run's orchestrator is gone: nothing records it until "
            f"<code>{escape(str(row.get('recover')))}</code> collects it from its grader's store.</p>"
        )
    body = f"""<h1>{escape(title)} {status_badge(str(row.get("status")))}</h1>{live_line}{sandbox_warning}
<div class="cols"><div><div class="figure" id="timeline" data-run="{escape(rid)}" data-live="{int(live)}">{timeline_svg}</div>
<p><a href="/runs/{escape(quote(rid, safe=""))}/timeline.svg?download=1">download SVG</a> ·
<a href="/api/runs/{escape(quote(rid, safe=""))}">JSON</a></p></div>
<div><h2>Headline: held-out test</h2>{no_headline}{_meta_list(headline)}
<h2>Dev: best of k on dev, optimistic</h2><p class="note">the best of the k dev scores the agent saw; biased
upward by the choice among k, not the run's result.</p>{_meta_list(dev)}{_meta_list(other)}
<h2>Process (the grader's record)</h2>{_meta_list(process)}
<h2>Peers' protocol: best of k on test, optimistic</h2><p class="note">every distinct scored submission scored
once on test after the run, the best taken: chosen on the test split itself, so biased upward; not the run's
result.</p>{_meta_list(peers)}
{_off_target_html(row.get("off_target"))}
<h2>Run</h2>{about_html}
{audit_html(row, detail["audit"], meta)}</div></div>
{"<h2>Submissions</h2><table><thead><tr><th>id</th><th>status</th><th>score</th><th>95% CI</th><th>improvement</th><th>path (as the agent gave it)</th><th>error</th></tr></thead><tbody>" + sub_rows + "</tbody></table>" if sub_rows else ""}
{items}
{trajectory_html(turns)}
{agent_files}{grader_html}"""
    return layout(title, body, LIVE_JS, nonce=nonce)


def _off_target_html(entries: Any) -> str:
    if not isinstance(entries, list) or not entries:
        return ""
    rows = "".join(
        f"<tr><td>{fmt(e.get('task'))}</td><td class='num'>{fmt(e.get('base'))}</td>"
        f"<td class='num'>{fmt(e.get('selected'))}</td><td class='num'>{fmt(e.get('change'))}</td>"
        f"<td class='num'>{fmt(e.get('ci95'), 'ci')}</td>"
        f"<td>{'<b>regressed</b>' if e.get('regressed') else fmt(e.get('error') or '')}</td></tr>"
        for e in entries
        if isinstance(e, dict)
    )
    return (
        "<h2>Off-target (test split, selected vs base)</h2><table><thead><tr><th>task</th><th>base</th>"
        "<th>selected</th><th>change</th><th>95% CI</th><th></th></tr></thead><tbody>" + rows + "</tbody></table>"
    )


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
