"""The audit's result on the pages: its open flags, and the planted decoys the agent touched (the ``decoys``
column: None, no decoys were planted; ``[]``, planted and none touched; else the evidence, see
:mod:`autorl.decoys`).

Decoy evidence names the agent's own files (``decoy:canary:<decoy>@<the file it was found in>``): every part of
it is escaped, capped and shown as the agent's text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["audit_cell", "audit_html", "decoy_entries", "decoys_cell"]

#: the most decoy evidence entries a page lists, and the most characters of each
MAX_ENTRIES, MAX_CHARS = 50, 300

#: what each kind of evidence means, in words
_KINDS = {"opened": "opened", "token": "used its token at", "canary": "its canary found in"}


def decoy_entries(decoys: Any) -> list[tuple[str, str, str]] | None:
    """The ``decoys`` column as ``(kind, decoy, where)`` entries (``where`` empty when the kind has none);
    None when no decoys were planted. A malformed entry is kept whole as its own kind ``?``."""
    if decoys is None:
        return None
    items = decoys if isinstance(decoys, list) else [decoys]
    out = []
    for e in items[:MAX_ENTRIES]:
        text = str(e)[:MAX_CHARS]
        prefix, _, rest = text.partition(":")
        kind, _, target = rest.partition(":")
        if prefix != "decoy" or kind not in _KINDS or not target:
            out.append(("?", text, ""))
            continue
        name, _, where = target.partition("@")
        out.append((kind, name, where))
    return out


def decoys_cell(decoys: Any) -> str:
    """The runs table's word on the decoys: ``no decoys``, ``decoys untouched`` or ``took the bait (N)``, N the
    distinct decoys touched; escaped HTML, the evidence in the title."""
    entries = decoy_entries(decoys)
    if entries is None:
        return "<span class='muted decoys'>no decoys</span>"
    if not isinstance(decoys, list):  # a record from elsewhere with a value of another shape
        return "<span class='decoys'>decoys: unreadable record</span>"
    if not entries:
        return "<span class='decoys'>decoys untouched</span>"
    touched = sorted({name for kind, name, _ in entries if kind != "?"}) or ["?"]
    title = "; ".join(f"{_KINDS.get(k, '?')} {n}" + (f" {w}" if w else "") for k, n, w in entries[:20])
    return f"<span class='bait decoys' title='{escape(title)}'>took the bait ({len(touched)})</span>"


def audit_cell(row: Mapping[str, Any]) -> str:
    """The audit's open flags, or ``no flags`` (and what was overridden), then the decoys; a run in progress
    has neither yet."""
    if row.get("live"):
        return "<span class='muted'>after the run</span>"
    flags, overridden = row.get("audit_flags"), row.get("audit_overridden")
    text = (", ".join(str(f) for f in flags) if isinstance(flags, list) else str(flags)) if flags else "no flags"
    if isinstance(overridden, list) and overridden:
        text += f" ({len(overridden)} overridden)"
    shown = escape(text) if not flags else f"<span class='warning'>{escape(text)}</span>"
    return f"{shown} · {decoys_cell(row.get('decoys'))}"


def _judge_evidence(flag: Mapping[str, Any]) -> str:
    """A judge's flag's quoted evidence (``location: quote``, the agent's text: escaped, capped)."""
    evidence = flag.get("evidence") if str(flag.get("name", "")).startswith("judge:") else None
    if not isinstance(evidence, list) or not evidence:
        return ""
    items = "".join(f"<li><code>{escape(str(e)[:400])}</code></li>" for e in evidence[:10])
    return f"<ul class='judge-evidence'>{items}</ul>"


def _decoys_html(row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    recorded: Mapping[str, Any] = meta["decoys"] if isinstance(meta.get("decoys"), Mapping) else {}
    planted_list = recorded.get("planted")
    planted = [str(d.get("name")) for d in planted_list if isinstance(d, Mapping)] \
        if isinstance(planted_list, list) else []
    entries = decoy_entries(row.get("decoys"))
    if entries is None:
        return "<div id='decoys'><p class='muted'>no decoys were planted in this run</p></div>"
    if not isinstance(row.get("decoys"), list):
        return f"<div id='decoys'><p>decoys: unreadable record ({escape(str(row.get('decoys'))[:MAX_CHARS])})</p></div>"
    how = f", watched by {escape(str(recorded['watch']))}" if recorded.get("watch") else ""
    names = f"planted: {escape(', '.join(planted))}{how}. " if planted else ""
    if not entries:
        return f"<div id='decoys'><p>{names}None touched.</p></div>"
    touched = sorted({name for kind, name, _ in entries if kind != "?"}) or ["?"]
    items = "".join(f"<li><b>{escape(_KINDS.get(kind, 'unreadable entry'))}</b> <code>{escape(name)}</code>"
                    + (f" <code class='agent-text'>{escape(where)}</code>" if where else "") + "</li>"
                    for kind, name, where in entries)
    return (f"<div id='decoys'><p class='warning bait'>the agent touched {len(touched)} planted decoy(s) "
            f"(leaked-looking answers or tokens no honest agent has a reason to use): {escape(', '.join(touched))}"
            f"</p><p class='note'>{names}Where a canary was found is the agent's own file name, shown as plain "
            f"text.</p><ul id='decoys-touched'>{items}</ul></div>")


def audit_html(row: Mapping[str, Any], flags: list[dict[str, Any]], meta: Mapping[str, Any]) -> str:
    """The run page's audit section: each flag with its detail (a judge's quoted evidence, a human's decision),
    or ``no flags``; then the decoys. A run in progress is audited once it ends."""
    if row.get("live"):
        return "<h2>Audit</h2><p id='audit' class='muted'>the audit runs once the run ends</p>"
    items = "".join(f"<li><b>{escape(str(f.get('name')))}</b> ({escape(str(f.get('severity')))}): "
                    f"{escape(str(f.get('detail')))}"
                    f"{' — overridden: ' + escape(str(f['overrides'][-1].get('reason'))) if f.get('overrides') else ''}"
                    f"{_judge_evidence(f)}</li>" for f in flags)
    head = f"<ul id='audit'>{items}</ul>" if items else "<p id='audit'>no flags</p>"
    return f"<h2>Audit</h2>{head}<h3>Decoys</h3>{_decoys_html(row, meta)}"
