"""The dashboard's page shell: the header and styles every page shares, and how a value is shown in one.

Every page (:mod:`autorl.ui.pages`, :mod:`autorl.ui.sweep`) is a function over plain data that returns
:func:`layout` around its body; each value it shows goes through :func:`fmt` (or ``html.escape``), never into
the page as it came.
"""

from __future__ import annotations

from html import escape
from typing import Any

from autorl.record.display import fmt_p

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
th { background: var(--bg); position: sticky; top: 0; white-space: normal; }
td.wrap { white-space: normal; overflow-wrap: anywhere; min-width: 5em; } th a { color: var(--fg); text-decoration: none; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:hover td { background: #f3f6fa; }
a { color: var(--accent); }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 12px; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
select, input, button { font: inherit; padding: 4px 6px; }
.status { padding: 1px 8px; border-radius: 10px; font-size: 12px; }
.status-beat-baseline { background: #dafbe1; } .status-no-test-score, .status-below-baseline { background: #ffebe9; }
.status-no-clear-change { background: #eaeef2; }
.status-running { background: #ddf4ff; } .status-lost { background: #eaeef2; }
.flag { color: #9a6700; }
.bait { color: #82071e; font-weight: 600; }
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
section.untrusted { border: 2px dashed #bf8700; border-radius: 6px; padding: 4px 12px 10px; margin: 16px 0;
  background: #fff8c5; }
section.untrusted > .untrusted-label { font-size: 12px; font-weight: 600; color: #7d4e00; margin: 6px 0; }
.sandbox-none { background: #ffebe9; color: #82071e; font-weight: 600; padding: 1px 6px; border-radius: 4px; }
.warning { background: #ffebe9; border: 1px solid #ff8182; padding: 6px 10px; border-radius: 6px; }
.note { color: var(--muted); font-size: 12px; }
table.items { table-layout: fixed; } table.items th:nth-child(-n+4) { width: 7em; }
table.items td.txt { white-space: pre-wrap; overflow-wrap: anywhere; vertical-align: top; font-family: ui-monospace,
  monospace; font-size: 12px; } table.items td { vertical-align: top; }
table.items td.txt > div { max-height: 14em; overflow: auto; }
tr.outcome-win td:nth-child(2) { color: #1a7f37; font-weight: 600; }
tr.outcome-loss td:nth-child(2) { color: #cf222e; font-weight: 600; }
"""


def layout(title: str, body: str, script: str = "", *, nonce: str = "") -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · autorl</title><style>{CSS}</style></head>
<body><header><a class="brand" href="/">autorl</a><a href="/">runs</a><a href="/compare">compare</a>
<a href="/sweeps">sweeps</a>
<a href="/api/runs">json</a></header><main>{body}</main>
<script nonce="{escape(nonce)}">{script}</script></body></html>"""


def is_num(value: Any) -> bool:
    """A number (an int or a float, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def fmt(value: Any, kind: str = "num") -> str:
    """``value`` as escaped HTML."""
    if value is None:
        return "&ndash;"
    pair = isinstance(value, list | tuple) and len(value) == 2 and all(is_num(v) for v in value)
    if kind == "ci" and pair:
        return f"[{value[0]:+.1f}, {value[1]:+.1f}]"
    if kind == "range" and pair:
        return f"[{value[0]:.1f}, {value[1]:.1f}]"
    if kind == "secs" and is_num(value):
        return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"
    if kind == "p":
        return fmt_p(value)
    if kind == "pct" and is_num(value):
        return f"{value:.0%}"
    if kind == "yesno" and isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return escape(str(value))


def status_badge(status: str) -> str:
    """A run's status as a badge; only ``beat baseline`` is green (its class: the words joined by ``-``)."""
    css = "-".join(status.split())
    return f'<span class="status status-{escape(css)}">{escape(status)}</span>'


def not_found(what: str, *, nonce: str = "") -> str:
    return layout("not found", f"<h1>Not found</h1><p>{escape(what)}</p><p><a href='/'>all runs</a></p>", nonce=nonce)


def untrusted_section(title: str, inner: str, what: str = "written by the agent") -> str:
    """Agent-written content, framed and labelled so that nobody takes it for the harness's own word."""
    return (
        f'<section class="untrusted"><div class="untrusted-label">⚠ {escape(what)}: untrusted, shown as '
        f"plain text</div><h2>{escape(title)}</h2>{inner}</section>"
    )


#: what an agent file that cannot be read safely (a link, a FIFO, a device) shows instead
NOT_SHOWN = "not shown (not a regular file, or reached through a link)"
