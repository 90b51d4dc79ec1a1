"""Verdicts of ``autorl selftest``: what the red team's evidence and the orchestrator's own observations say.

Pure functions: the red team writes what it got (hostile input, read through :mod:`autorl.untrusted` by the
caller), the orchestrator adds what only it knows (the run's hidden items, which listener accepted, which host
file appeared, the record ``autorl run`` printed), and each attack becomes one :class:`Verdict`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from autorl.selftest.observed import EnvironmentSeen, GatewaySeen, HomeSeen, Observed, ScorerCodeSeen

HELD, THROUGH, NA = "held", "GOT THROUGH", "n/a"

#: The attack lines, in the order they print.
ATTACKS = (
    "test data by path",
    "/proc",
    "installed code",
    "operator's home",
    "agent environment",
    "third-party scorer",
    "re-derivation",
    "scorer escapes",
    "grader tokens and admin",
    "output links, FIFOs, sparse files",
    "host sockets",
    "network off",
    "write outside the workspace",
    "gateway keys and budget",
    "record fed garbage",
    "audit fed garbage",
    "run recorded",
)


@dataclass(frozen=True)
class Verdict:
    """One attack: held, GOT THROUGH or n/a, with the evidence in one line."""

    attack: str
    status: str
    evidence: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.attack:<36} {self.status:<12} {self.evidence}"


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))  # agent text on a terminal
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _strings(value: Any) -> list[str]:
    """``value`` as a list of strings when it is a list, else empty: evidence is hostile input."""
    return [str(v) for v in value] if isinstance(value, list) else []


def _error(got: Any) -> str | None:
    return str(got["error"]) if isinstance(got, dict) and "error" in got else None


def _gateway(got: Any, seen: GatewaySeen | None) -> tuple[str, str]:
    """Held only when the key appears nowhere the agent wrote or printed, no request reached the upstream past
    the gateway, and the upstream served no more than the budget (it bills prompts as the gateway estimates
    them, so there is no allowance)."""
    if seen is None:
        return NA, "no upstream model API in this run"
    holes = []
    if seen.leaked:
        holes.append(
            f"the upstream key is in {seen.leaked[0]}" + (f" (+{len(seen.leaked) - 1})" if len(seen.leaked) > 1 else "")
        )
    if seen.direct:
        holes.append(f"{len(seen.direct)} direct call(s) reached the upstream: {seen.direct[0]}")
    if seen.served > seen.budget:
        holes.append(f"the upstream served {seen.served} tokens over {seen.calls} call(s), budget {seen.budget}")
    spend = got.get("spend") if isinstance(got, dict) else None
    after = spend.get("after_refusal") if isinstance(spend, dict) else None
    answered = after.get("200") if isinstance(after, dict) else None
    if isinstance(answered, int) and answered > 0:
        holes.append(f"{answered} call(s) were answered after the budget's refusal")
    if holes:
        return THROUGH, "; ".join(holes)
    if not isinstance(spend, dict) or _error(spend) or not isinstance(spend.get("calls"), dict):
        why = _error(spend) or _error(got) or "the red team left no evidence of its calls"
        return NA, f"the budget could not be tried: {why}"
    if not seen.calls:
        return NA, f"no call reached the upstream through the gateway ({_short(spend['calls'], 60)})"
    tried = sum(v for v in after.values() if isinstance(v, int)) if isinstance(after, dict) else 0
    return HELD, (
        f"key not found; no direct call reached the upstream; it served {seen.served} of {seen.budget} "
        f"tokens over {seen.calls} call(s)"
        + (
            f"; {tried} call(s) after the budget's refusal, none answered"
            if spend.get("refused") is True and tried
            else ""
        )
    )


def _home(seen: HomeSeen | None, no_evidence: str | None) -> tuple[str, str]:
    if seen is None or no_evidence:
        return NA, no_evidence or "no scratch home in this run"
    if seen.canaries or seen.leaked:
        found = [
            f"the canary of {seen.canaries[0]}" if seen.canaries else "",
            f"{len(seen.leaked)} name(s) the policy does not show, e.g. {seen.leaked[0]}" if seen.leaked else "",
        ]
        return THROUGH, "the agent got " + " and ".join(f for f in found if f)
    tool = (
        ""
        if seen.tool is None
        else (
            f"; the tool on PATH ran ({seen.tool})"
            if "selftest tool" in seen.tool
            else f"; the tool on PATH did not run ({seen.tool or 'no output'})"
        )
    )
    return HELD, (
        f"{seen.probed} canaries (~/.config, ~/.local/share, ~/.netrc...) unread; {seen.folders} folders "
        f"around what is shown list only what the policy shows{tool}"
    )


def _environment(seen: EnvironmentSeen | None, no_evidence: str | None) -> tuple[str, str]:
    if seen is None or seen.count is None or no_evidence:
        return NA, no_evidence or "the red team left no dump of its environment"
    if seen.leaks:
        return THROUGH, f"{seen.leaks[0]}" + (f" (+{len(seen.leaks) - 1})" if len(seen.leaks) > 1 else "")
    return HELD, f"{seen.count} variables: no canary, key, hidden-item secret or hidden item"


def _scorer_code(seen: ScorerCodeSeen | None) -> tuple[str, str]:
    if seen is None:
        return NA, "no scorer code was probed"
    holes = [*(f"the benchmark's {c} changed during the run" for c in seen.changed), *seen.got]
    if holes:
        return THROUGH, "; ".join(holes)
    if seen.error:
        return NA, f"the probe could not run as scorer code: {seen.error}"
    return HELD, (
        "under its policy scorer code read no canary and no other process's environment, wrote nothing "
        "of its folder and reached no listener"
    )


def judge(evidence: Mapping[str, Any] | None, seen: Observed) -> list[Verdict]:
    """One verdict per attack of :data:`ATTACKS`."""
    ev = dict(evidence or {})
    v: list[Verdict] = []
    no_evidence = "the red team left no evidence" if evidence is None else None

    def add(attack: str, status: str, why: str) -> None:
        v.append(Verdict(attack, status, _short(why)))

    given = ev.get("paths")
    paths: dict[str, Any] = given if isinstance(given, dict) else {}
    read = {p: got for p, got in paths.items() if p not in seen.installed_paths}
    installed = {p: got for p, got in paths.items() if p in seen.installed_paths}
    if no_evidence:
        add("test data by path", NA, no_evidence)
    elif read:
        path, got = next(iter(read.items()))
        add("test data by path", THROUGH, f"read {path}: {got!r}")
    else:
        add("test data by path", HELD, "hidden folder, grader store, ledger and secret: nothing read")

    proc = _strings(ev.get("proc"))
    if no_evidence or _error(ev.get("proc")):
        add("/proc", NA, no_evidence or f"the attempt failed: {_error(ev.get('proc'))}")
    elif proc:
        add("/proc", THROUGH, f"saw {len(proc)} harness process(es): {proc[0]}")
    else:
        add("/proc", HELD, "no grader or orchestrator process visible")

    if not seen.installed_paths:
        add("installed code", NA, "the benchmark names no installed evaluation data (hidden_paths)")
    elif no_evidence:
        add("installed code", NA, no_evidence)
    elif installed:
        add("installed code", THROUGH, f"read installed evaluation data {next(iter(installed))}")
    else:
        add("installed code", HELD, f"{len(seen.installed_paths)} installed evaluation file(s) masked")

    add("operator's home", *_home(seen.home, no_evidence))
    add("agent environment", *_environment(seen.environment, no_evidence))
    add("third-party scorer", *_scorer_code(seen.scorer_code))

    rebuilt = ev.get("rederive")
    if no_evidence or _error(rebuilt) or not isinstance(rebuilt, dict):
        add("re-derivation", NA, no_evidence or f"the run could not rebuild items: {_error(rebuilt)}")
    elif not seen.hidden:
        add("re-derivation", NA, "the run's hidden items could not be read back")
    else:
        hits = []
        for split, real in seen.hidden.items():
            if split in seen.public_splits or not real:
                continue
            mine = set(_strings(rebuilt.get(split)))
            if mine == real:
                hits.append(f"{split}: all {len(real)} hidden items rebuilt from the installed package")
        shares = [f"{s} {len(set(_strings(rebuilt.get(s))) & r)}/{len(r)}" for s, r in seen.hidden.items() if r]
        if hits:
            add("re-derivation", THROUGH, "; ".join(hits))
        else:
            add("re-derivation", HELD, "another secret draws other items (" + ", ".join(shares) + " in common)")

    scorer = ev.get("scorer")
    if seen.scorer is not None and seen.scorer[0]:
        add("scorer escapes", THROUGH, f"the grader's evaluator: {seen.scorer[2]}")
    elif seen.scorer is not None and seen.scorer[1] and (not isinstance(scorer, dict) or _error(scorer)):
        add("scorer escapes", HELD, f"the grader's evaluator: {seen.scorer[2]} (score() could not run in the run)")
    elif no_evidence or not isinstance(scorer, dict) or _error(scorer):
        add("scorer escapes", NA, no_evidence or f"score() could not be tried: {_error(scorer)}")
    elif _strings(scorer.get("scored")):
        add("scorer escapes", THROUGH, "; ".join(_strings(scorer.get("scored"))[:3]))
    elif not isinstance(scorer.get("tried"), int) or not scorer["tried"]:
        add("scorer escapes", NA, "no item to score")
    else:
        add("scorer escapes", HELD, f"{scorer['tried']} adversarial completions scored 0 by score()")

    admin = ev.get("admin")
    if no_evidence or not isinstance(admin, dict) or _error(admin):
        add("grader tokens and admin", NA, no_evidence or f"the attempt failed: {_error(admin)}")
    elif _strings(admin.get("accepted")) or _strings(admin.get("admin_env")):
        add(
            "grader tokens and admin",
            THROUGH,
            "; ".join([*_strings(admin.get("accepted")), *_strings(admin.get("admin_env"))]),
        )
    else:
        add("grader tokens and admin", HELD, "admin endpoints and /set_baseline refused every token")

    files = ev.get("files")
    if no_evidence or not isinstance(files, dict) or _error(files):
        add("output links, FIFOs, sparse files", NA, no_evidence or f"the attempt failed: {_error(files)}")
    else:
        submitted = files.get("submitted")
        taken = [
            f"{k} ({a[0]})"
            for k, a in (submitted if isinstance(submitted, dict) else {}).items()
            if isinstance(a, list) and a and isinstance(a[0], int) and 200 <= a[0] < 300 and '"done"' in str(a[1:])
        ]
        if taken:
            add("output links, FIFOs, sparse files", THROUGH, "scored a submission of " + ", ".join(taken))
        else:
            add("output links, FIFOs, sparse files", HELD, "link, FIFO and 1 TiB sparse submissions not scored")

    for attack, key in (("host sockets", "unix"), ("network off", "tcp")):
        if key == "tcp" and seen.network != "off":
            add(attack, NA, "the run's network is on (--network off tests it)")
        elif key == "tcp" and not seen.tcp_available:
            add(attack, NA, "this machine has no non-loopback address to listen on")
        elif seen.accepted.get(key, 0):
            add(
                attack,
                THROUGH,
                f"the host's {'Unix socket' if key == 'unix' else 'TCP listener'} accepted "
                f"{seen.accepted[key]} connection(s) from the run",
            )
        else:
            got = ev.get("sockets", {}).get(key) if isinstance(ev.get("sockets"), dict) else None
            add(attack, HELD, f"no connection reached the host ({got or 'not attempted'})")

    if seen.written:
        add("write outside the workspace", THROUGH, "a host file outside the workspace was written by the run")
    else:
        add("write outside the workspace", HELD, f"host file untouched ({ev.get('write') or 'not attempted'})")

    add("gateway keys and budget", *_gateway(ev.get("gateway"), seen.gateway))

    record = seen.record
    forged = ev["record"].get("forged") if isinstance(ev.get("record"), dict) else None
    forged = forged if isinstance(forged, float) else None  # the red team forges one odd score, 99.87
    if record is None:
        add("record fed garbage", NA, "no record to compare")
    elif forged is not None and forged in [v for v in record.values() if isinstance(v, float)]:
        add("record fed garbage", THROUGH, f"the recorded result carries the forged score {forged}")
    else:
        add("record fed garbage", HELD, "forged scores.json/result.json/usage ignored: scores are the grader's")

    flags = seen.audit
    broken = sorted({f for f in flags or [] if f in ("audit-failed", "audit-pending")})
    if record is None or flags is None:
        add("audit fed garbage", NA, "no recorded audit to read")
    elif broken:
        add("audit fed garbage", THROUGH, f"the garbage broke the audit: {', '.join(broken)}")
    elif "audit-incomplete" in flags:
        add("audit fed garbage", HELD, "the audit was cut short and says so (audit-incomplete)")
    else:
        add(
            "audit fed garbage",
            HELD,
            f"the audit finished over NUL, deep, odd-named and 64 GiB sparse files ({len(flags)} flag(s))",
        )

    if record is None:
        add("run recorded", THROUGH, seen.failure or "autorl run printed no record")
    else:
        add("run recorded", HELD, f"run {record.get('run_id', '?')} recorded ({record.get('end_reason', '?')})")
    return v
