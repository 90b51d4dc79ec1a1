"""HTML pages: server-rendered, inline CSS and a few lines of inline JS, nothing fetched from elsewhere."""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import urlencode

from autorl.ui.data import RUN_COLUMNS

CSS = """
:root { --fg:#1f2328; --muted:#656d76; --line:#d0d7de; --bg:#f6f8fa; --accent:#0969da; }
* { box-sizing: border-box; }
body { font-family: system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif; color: var(--fg); margin: 0;
       font-size: 14px; }
header { background: #24292f; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: center; }
header a { color: #fff; text-decoration: none; font-weight: 600; }
header .brand { font-size: 16px; }
main { padding: 16px 24px 48px; max-width: 1400px; }
h1 { font-size: 20px; margin: 8px 0 12px; } h2 { font-size: 16px; margin: 24px 0 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 6px 8px; text-align: left; white-space: nowrap; }
th { background: var(--bg); position: sticky; top: 0; } th a { color: var(--fg); text-decoration: none; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:hover td { background: #f3f6fa; }
a { color: var(--accent); }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
select, input, button { font: inherit; padding: 4px 6px; }
.status { padding: 1px 8px; border-radius: 10px; font-size: 12px; }
.status-success { background: #dafbe1; } .status-failed { background: #ffebe9; }
.status-running { background: #ddf4ff; } .status-abandoned { background: #eaeef2; }
.flag { color: #9a6700; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; font-family: ui-monospace,monospace; font-size: 12px;
  word-break: break-all; }
pre.log { background: #0d1117; color: #e6edf3; padding: 10px; max-height: 360px; overflow: auto; font-size: 12px; }
.figure { border: 1px solid var(--line); display: inline-block; padding: 4px; background: #fff; }
.figure svg { max-width: 100%; height: auto; }
.cols { display: flex; flex-wrap: wrap; gap: 24px; } .cols > div { flex: 1 1 420px; min-width: 0; }
details.turn { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; padding: 6px 10px; }
details.turn summary { cursor: pointer; } .turn pre { white-space: pre-wrap; font-size: 12px; background: var(--bg);
  padding: 6px; max-height: 300px; overflow: auto; }
.muted { color: var(--muted); } .live-dot { color: #1a7f37; }
"""

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
          (d.row.best_score === null ? '-' : d.row.best_score.toFixed(2)) + ', ' + Math.round(d.row.duration_s) + ' s';
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


def layout(title: str, body: str, script: str = "") -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · autorl</title><style>{CSS}</style></head>
<body><header><a class="brand" href="/">autorl</a><a href="/">runs</a><a href="/compare">compare</a>
<a href="/api/runs">json</a></header><main>{body}</main>
<script>{script}</script></body></html>"""


def fmt(value: Any, kind: str = "num") -> str:
    if value is None:
        return "&ndash;"
    if kind == "ci" and isinstance(value, (list, tuple)) and len(value) == 2:
        return f"[{value[0]:+.1f}, {value[1]:+.1f}]"
    if kind == "range" and isinstance(value, (list, tuple)) and len(value) == 2:
        return f"[{value[0]:.1f}, {value[1]:.1f}]"
    if kind == "secs" and isinstance(value, (int, float)):
        return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"
    if isinstance(value, float):
        return f"{value:.2f}"
    return escape(str(value))


def status_badge(status: str) -> str:
    return f'<span class="status status-{escape(status)}">{escape(status)}</span>'


def run_rows_html(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        cells = []
        for key, _, kind in RUN_COLUMNS:
            value = r.get(key)
            if key == "status":
                cell = status_badge(str(value))
                if r.get("audit_flags"):
                    cell += f' <span class="flag" title="{escape(", ".join(r["audit_flags"]))}">⚑</span>'
                cells.append(f"<td>{cell}</td>")
            elif key == "timestamp":
                cells.append(f'<td><a href="/runs/{escape(r["run_id"])}">{escape(str(value))}</a></td>')
            else:
                css = ' class="num"' if kind in ("num", "secs") else ""
                cells.append(f"<td{css}>{fmt(value, kind)}</td>")
        out.append(f'<tr data-run="{escape(r["run_id"])}">{"".join(cells)}</tr>')
    if not out:
        out.append(f'<tr><td colspan="{len(RUN_COLUMNS)}" class="muted">no runs match</td></tr>')
    return "\n".join(out)


def runs_page(rows: list[dict[str, Any]], choices: dict[str, list[str]], params: dict[str, str]) -> str:
    def select(name: str, label: str) -> str:
        opts = "".join(f'<option value="{escape(v)}"{" selected" if params.get(name) == v else ""}>{escape(v)}</option>'
                       for v in choices.get(name, []))
        return f'<label>{label}<select name="{name}"><option value="">all</option>{opts}</select></label>'

    sort, order = params.get("sort") or "timestamp", params.get("order") or ""
    heads = []
    for key, title, _ in RUN_COLUMNS:
        if key == "improvement_ci95":
            heads.append(f"<th>{title}</th>")
            continue
        new_order = "asc" if sort == key and order == "desc" else "desc"
        q = {k: v for k, v in params.items() if v and k not in ("sort", "order")} | {"sort": key, "order": new_order}
        arrow = (" ▼" if order == "desc" else " ▲") if sort == key and order else ""
        heads.append(f'<th><a href="/?{escape(urlencode(q))}">{title}{arrow}</a></th>')
    live = any(r.get("status") == "running" for r in rows)
    body = f"""<h1>Runs <span class="muted">({len(rows)})</span></h1>
<form class="filters" method="get" action="/">{select("task", "task")}{select("agent", "agent")}
{select("model", "base model")}{select("status", "status")}
<label>from<input type="date" name="since" value="{escape(params.get("since", ""))}"></label>
<label>to<input type="date" name="until" value="{escape(params.get("until", ""))}"></label>
<button type="submit">filter</button> <a href="/">clear</a></form>
<table id="runs"><thead><tr>{"".join(heads)}</tr></thead>
<tbody id="runs-body" data-live="{int(live)}">{run_rows_html(rows)}</tbody></table>"""
    return layout("runs", body, TABLE_JS)


def _meta_list(pairs: list[tuple[str, Any]]) -> str:
    return '<dl class="meta">' + "".join(f"<dt>{escape(k)}</dt><dd>{fmt(v) if not isinstance(v, str) else escape(v)}</dd>"
                                         for k, v in pairs if v not in (None, "")) + "</dl>"


def run_page(detail: dict[str, Any], timeline_svg: str, logs: dict[str, str | None],
             turns: list[dict[str, Any]] | None) -> str:
    row, result = detail["row"], detail.get("result") or {}
    meta = result.get("meta", {})
    rid = detail["run_id"]
    live = detail["live"]
    numbers = [("baseline (dev)", row.get("baseline")), ("best dev", row.get("best_score")),
               ("improvement", row.get("improvement")), ("improvement 95% CI", fmt(row.get("improvement_ci95"), "ci")),
               ("p value", row.get("p_value")), ("test baseline", row.get("test_baseline")),
               ("test score", row.get("test_score")), ("test improvement", row.get("test_improvement")),
               ("test improvement 95% CI", fmt(row.get("test_improvement_ci95"), "ci")),
               ("submissions", row.get("submissions")), ("duration", fmt(row.get("duration_s"), "secs")),
               ("end", row.get("end_reason"))]
    sandbox = meta.get("sandbox") or {}
    about = [("run id", rid), ("task", row.get("task")), ("agent", row.get("agent")),
             ("base model", row.get("base_model")), ("model source", meta.get("model_source")),
             ("model revision", meta.get("model_revision")), ("seed", row.get("seed")),
             ("config hash", row.get("config_hash")), ("backend", meta.get("backend")),
             ("autorl", meta.get("autorl_version")), ("python", meta.get("python")),
             ("sandbox", f"{sandbox.get('mode')} (network {sandbox.get('network')})" if sandbox else None),
             ("limit", meta.get("limit")), ("workspace", row.get("workspace"))]
    usage = meta.get("llm_usage")
    if isinstance(usage, dict):
        about += [("llm tokens", f"{usage.get('prompt_tokens', 0)} in / {usage.get('completion_tokens', 0)} out"),
                  ("llm cost (USD)", usage.get("cost_usd")), ("llm steps", usage.get("steps"))]
    flags = "".join(f"<li><b>{escape(f['name'])}</b> ({escape(f['severity'])}): {escape(f['detail'])}"
                    f"{' — overridden: ' + escape(f['overrides'][-1]['reason']) if f['overrides'] else ''}</li>"
                    for f in detail.get("audit", []))
    subs = result.get("submissions") or []
    sub_rows = "".join(
        f"<tr><td>{s['submission_id']}</td><td>{escape(str(s.get('status')))}</td><td class='num'>{fmt(s.get('score'))}</td>"
        f"<td class='num'>{fmt(s.get('ci95'), 'range')}</td><td class='num'>{fmt(s.get('improvement'))}</td>"
        f"<td>{escape(str(s.get('model_path', '')))}</td><td>{escape(str(s.get('error') or ''))}</td></tr>"
        for s in subs)
    log_html = "".join(f"<div><h2>{escape(name)}</h2><pre class='log'>{escape(text) if text else '<i>none</i>'}</pre></div>"
                       for name, text in logs.items())
    title = f"{row.get('agent')} on {row.get('task')} from {row.get('base_model')}"
    live_line = (f'<p><span class="live-dot">●</span> live: <span id="live-summary">{row.get("submissions")} '
                 f"submission(s)</span> — updates every 2 s</p>") if live else ""
    body = f"""<h1>{escape(title)} {status_badge(str(row.get("status")))}</h1>{live_line}
<div class="cols"><div><div class="figure" id="timeline" data-run="{escape(rid)}" data-live="{int(live)}">{timeline_svg}</div>
<p><a href="/runs/{escape(rid)}/timeline.svg?download=1">download SVG</a> ·
<a href="/api/runs/{escape(rid)}">JSON</a></p></div>
<div><h2>Numbers</h2>{_meta_list(numbers)}<h2>Run</h2>{_meta_list(about)}
{"<h2>Audit</h2><ul>" + flags + "</ul>" if flags else ""}</div></div>
{"<h2>Submissions</h2><table><thead><tr><th>id</th><th>status</th><th>score</th><th>95% CI</th><th>improvement</th><th>path</th><th>error</th></tr></thead><tbody>" + sub_rows + "</tbody></table>" if sub_rows else ""}
{trajectory_html(turns)}
<div class="cols">{log_html}</div>"""
    return layout(title, body, LIVE_JS)


def trajectory_html(turns: list[dict[str, Any]] | None) -> str:
    if turns is None:
        return ""
    total_in = sum(int(t.get("usage", {}).get("prompt_tokens") or 0) for t in turns if t["kind"] == "turn")
    total_out = sum(int(t.get("usage", {}).get("completion_tokens") or 0) for t in turns if t["kind"] == "turn")
    items = []
    for t in turns:
        if t["kind"] == "turn":
            calls = "".join(f"<div><b>{escape(str(c.get('name')))}</b><pre>{escape(_pretty(c.get('arguments')))}</pre></div>"
                            for c in t["tool_calls"])
            results = "".join(f"<div class='muted'>result</div><pre>{escape(_pretty(r))}</pre>" for r in t["tool_results"])
            u = t.get("usage") or {}
            names = ", ".join(str(c.get("name")) for c in t["tool_calls"]) or "message"
            items.append(f"""<details class="turn" data-step="{t['step']}"><summary>step {t['step']}: {escape(names)}
<span class="muted">· {u.get('prompt_tokens', 0)} in / {u.get('completion_tokens', 0)} out tokens
{f"· {t['latency_s']:.1f} s" if isinstance(t.get('latency_s'), (int, float)) else ""}</span></summary>
{f"<pre>{escape(str(t['content']))}</pre>" if t.get('content') else ""}{calls}{results}</details>""")
        elif t["kind"] == "event":
            items.append(f'<div class="muted">event: {escape(t["event"])} {escape(json.dumps(t["detail"])[:300])}</div>')
        else:
            items.append(f"<details class='turn'><summary>{escape(str(t.get('type') or 'record'))}</summary>"
                         f"<pre>{escape(json.dumps(t['detail'], indent=1)[:4000])}</pre></details>")
    return (f"<h2>Trajectory <span class='muted'>({sum(1 for t in turns if t['kind'] == 'turn')} turns, "
            f"{total_in} in / {total_out} out tokens)</span></h2><div id='trajectory'>{''.join(items)}</div>")


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            return json.dumps(json.loads(value), indent=1)[:6000]
        except ValueError:
            return value[:6000]
    return json.dumps(value, indent=1)[:6000]


def compare_page(tasks: list[str], task: str | None, cmp: dict[str, Any] | None, svg: str, metric: str) -> str:
    opts = "".join(f'<option value="{escape(t)}"{" selected" if t == task else ""}>{escape(t)}</option>' for t in tasks)
    mopts = "".join(f'<option value="{m}"{" selected" if m == metric else ""}>{label}</option>'
                    for m, label in (("auto", "test where every run has it, else dev"),
                                     ("test_improvement", "test improvement"), ("improvement", "dev improvement")))
    table = ""
    if cmp:
        table = "<table><thead><tr><th>agent</th><th>runs</th><th>mean</th><th>95% CI</th><th>success</th><th>base models</th></tr></thead><tbody>" + "".join(
            f"<tr><td>{escape(a['agent'])}</td><td class='num'>{a['n']}</td><td class='num'>{fmt(a['mean'])}</td>"
            f"<td class='num'>{fmt(a['ci95'], 'ci')}</td><td class='num'>{a['success_rate']:.0%}</td>"
            f"<td>{escape(', '.join(a['models']))}</td></tr>" for a in cmp["agents"]) + "</tbody></table>"
    q = urlencode({"task": task or "", "metric": metric})
    body = f"""<h1>Compare agents</h1>
<form class="filters" method="get" action="/compare"><label>task<select name="task">{opts}</select></label>
<label>metric<select name="metric">{mopts}</select></label><button type="submit">show</button></form>
{f'<div class="figure" id="compare">{svg}</div><p><a href="/compare.svg?{escape(q)}&download=1">download SVG</a> · <a href="/api/compare?{escape(q)}">JSON</a></p>{table}' if task else '<p class="muted">no runs recorded yet</p>'}"""
    return layout("compare", body)


def not_found(what: str) -> str:
    return layout("not found", f"<h1>Not found</h1><p>{escape(what)}</p><p><a href='/'>all runs</a></p>")
