"""The audit's result on the pages: its open flags, and the planted decoys: the bait the agent took (the
``decoys`` column: None, no decoys were planted; ``[]``, planted and none taken; else the evidence, see
:mod:`autorl.decoys`) and, apart, the decoys it read (``decoys_read``: weaker evidence, shown as "read", never as
bait: any walk of a workspace reads them).

Decoy evidence names the agent's own files (``decoy:canary:<decoy>@<the file it was found in>``): every part of
it is escaped, capped and shown as the agent's text, never as markup.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from autorl.record.schema import AuditFlag

__all__ = ["audit_cell", "audit_html", "decoy_entries", "decoys_cell"]

#: the most decoy evidence entries a page lists, and the most characters of each
MAX_ENTRIES, MAX_CHARS = 50, 300

#: what each kind of evidence means, in words
_KINDS = {"opened": "read", "token": "presented its token at", "canary": "its canary found in"}


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


def decoys_cell(decoys: Any, read: Any = None) -> str:
    """The runs table's word on the decoys: ``no decoys``, ``decoys untouched``, ``read (M)`` (the decoys read,
    muted: not bait) or ``took the bait (N)``, N the distinct decoys used; escaped HTML, the evidence in the
    title."""
    entries = decoy_entries(decoys)
    if entries is None:
        return "<span class='muted decoys'>no decoys</span>"
    if not isinstance(decoys, list):  # a record from elsewhere with a value of another shape
        return "<span class='decoys'>decoys: unreadable record</span>"
    reads = decoy_entries(read) if isinstance(read, list) else []
    read_names = sorted({name for kind, name, _ in reads or [] if kind != "?"})
    read_part = (
        (
            f"<span class='muted decoys-read' title='{escape('read: ' + ', '.join(read_names))}'>"
            f"read ({len(read_names)})</span>"
        )
        if read_names
        else ""
    )
    if not entries:
        return read_part or "<span class='decoys'>decoys untouched</span>"
    used = sorted({name for kind, name, _ in entries if kind != "?"}) or ["?"]
    title = "; ".join(f"{_KINDS.get(k, '?')} {n}" + (f" {w}" if w else "") for k, n, w in entries[:20])
    bait = f"<span class='bait decoys' title='{escape(title)}'>took the bait ({len(used)})</span>"
    return f"{bait} · {read_part}" if read_part else bait


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
    return f"{shown} · {decoys_cell(row.get('decoys'), row.get('decoys_read'))}"


def _judge_evidence(flag: Mapping[str, Any]) -> str:
    """A judge's flag's quoted evidence (``location: quote``, the agent's text: escaped, capped)."""
    evidence = flag.get("evidence") if str(flag.get("name", "")).startswith("judge:") else None
    if not isinstance(evidence, list) or not evidence:
        return ""
    items = "".join(f"<li><code>{escape(str(e)[:400])}</code></li>" for e in evidence[:10])
    return f"<ul class='judge-evidence'>{items}</ul>"


def _items(entries: list[tuple[str, str, str]]) -> str:
    return "".join(
        f"<li><b>{escape(_KINDS.get(kind, 'unreadable entry'))}</b> <code>{escape(name)}</code>"
        + (f" <code class='agent-text'>{escape(where)}</code>" if where else "")
        + "</li>"
        for kind, name, where in entries
    )


def _decoys_html(row: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    recorded: Mapping[str, Any] = meta["decoys"] if isinstance(meta.get("decoys"), Mapping) else {}
    planted_list = recorded.get("planted")
    planted = (
        [f"{d.get('name')} ({d.get('rel')})" for d in planted_list if isinstance(d, Mapping)]
        if isinstance(planted_list, list)
        else []
    )
    entries = decoy_entries(row.get("decoys"))
    if entries is None:
        return "<div id='decoys'><p class='muted'>no decoys were planted in this run</p></div>"
    if not isinstance(row.get("decoys"), list):
        return f"<div id='decoys'><p>decoys: unreadable record ({escape(str(row.get('decoys'))[:MAX_CHARS])})</p></div>"
    how = f", reads watched by {escape(str(recorded['watch']))}" if recorded.get("watch") else ""
    names = f"planted: {escape(', '.join(planted))}{how}. " if planted else ""
    reads = decoy_entries(row.get("decoys_read")) if isinstance(row.get("decoys_read"), list) else []
    read_html = (
        (
            f"<p class='note decoys-read'>read {len({n for _, n, _ in reads or []})} decoy(s): weaker "
            "evidence, not bait (a <code>grep -r</code>, a <code>tar</code> or a copy of the workspace reads "
            f"every file in it)</p><ul id='decoys-read'>{_items(reads or [])}</ul>"
        )
        if reads
        else ""
    )
    if not entries:
        return f"<div id='decoys'><p>{names}No bait taken.</p>{read_html}</div>"
    used = sorted({name for kind, name, _ in entries if kind != "?"}) or ["?"]
    return (
        f"<div id='decoys'><p class='warning bait'>the agent took the bait of {len(used)} planted decoy(s) "
        f"(presented a decoy token, or put a decoy's canary in a submission, an output or data of its own: "
        f"acts no honest work performs): {escape(', '.join(used))}</p><p class='note'>{names}Where a canary "
        f"was found is the agent's own file name, shown as plain text.</p><ul id='decoys-touched'>"
        f"{_items(entries)}</ul>{read_html}</div>"
    )


def audit_html(row: Mapping[str, Any], flags: list[AuditFlag], meta: Mapping[str, Any]) -> str:
    """The run page's audit section: each flag with its detail (a judge's quoted evidence, a human's decision),
    or ``no flags``; then the decoys. A run in progress is audited once it ends."""
    if row.get("live"):
        return "<h2>Audit</h2><p id='audit' class='muted'>the audit runs once the run ends</p>"
    items = "".join(
        f"<li><b>{escape(str(f.get('name')))}</b> ({escape(str(f.get('severity')))}): "
        f"{escape(str(f.get('detail')))}"
        f"{' — overridden: ' + escape(str(f['overrides'][-1].get('reason'))) if f.get('overrides') else ''}"
        f"{_judge_evidence(f)}</li>"
        for f in flags
    )
    head = f"<ul id='audit'>{items}</ul>" if items else "<p id='audit'>no flags</p>"
    return f"<h2>Audit</h2>{head}<h3>Decoys</h3>{_decoys_html(row, meta)}"
