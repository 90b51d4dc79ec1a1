"""The ``llm`` agent's process: a tool-calling loop over an OpenAI-compatible chat completions API.

Run by ``autorl run --agent llm`` inside the workspace. Configuration comes from the environment:
``OPENAI_API_BASE``, ``OPENAI_API_KEY``, ``CHAT_MODEL`` and the limits ``AUTORL_LLM_MAX_STEPS``,
``AUTORL_LLM_MAX_TOKENS``, ``AUTORL_LLM_MAX_COST`` (USD, with ``AUTORL_LLM_PRICE_IN``/``_OUT`` per million
tokens), ``AUTORL_LLM_CONTEXT`` (tokens) and ``AUTORL_LLM_SHELL_TIMEOUT`` (s). Every turn goes to
``trajectory.jsonl`` in the workspace; totals go to ``llm_usage.json`` (the agent's own view: the run
records the LLM gateway's counts). Under ``autorl run`` the base URL and key are the run's gateway's; a call it
refuses because the run's LLM budget is spent ends the session (``stop_reason`` ``llm_budget``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from autorl.errors import BudgetSpent, budget_kind
from autorl.procs.group import kill_group

TRUNCATE = 8000
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {"name": n, "description": d, "parameters": {"type": "object", "properties": p, "required": r}},
    }
    for n, d, p, r in [
        (
            "run_shell",
            "Run a bash command in the workspace; returns exit code and output (head and tail).",
            {"command": {"type": "string"}, "timeout_s": {"type": "number"}},
            ["command"],
        ),
        (
            "read_file",
            "Read a text file (relative to the workspace).",
            {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
            ["path"],
        ),
        (
            "write_file",
            "Create or overwrite a file in the workspace.",
            {"path": {"type": "string"}, "content": {"type": "string"}},
            ["path", "content"],
        ),
        (
            "edit_file",
            "Replace one exact occurrence of old with new in a file.",
            {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            ["path", "old", "new"],
        ),
        ("list_files", "List files under a folder of the workspace.", {"path": {"type": "string"}}, []),
        ("time_left", "Seconds left before the deadline.", {}, []),
        (
            "submit",
            "Submit a checkpoint folder inside $OUTPUT_DIR to the grader; returns its dev score.",
            {"model_path": {"type": "string"}},
            ["model_path"],
        ),
        ("finish", "End the session.", {"summary": {"type": "string"}}, []),
    ]
]


def truncate(text: str, limit: int = TRUNCATE) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m)) for m in messages) // 4


class Session:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.workspace = Path(env["WORKSPACE"]).resolve()
        self.deadline = float(env["AUTORL_DEADLINE"])
        self.model = env.get("CHAT_MODEL", "gpt-4o")
        self.max_steps = int(env.get("AUTORL_LLM_MAX_STEPS", "200"))
        self.max_tokens = int(env.get("AUTORL_LLM_MAX_TOKENS", "5000000"))
        self.max_cost = float(env["AUTORL_LLM_MAX_COST"]) if env.get("AUTORL_LLM_MAX_COST") else None
        self.price_in = float(env.get("AUTORL_LLM_PRICE_IN", "0")) / 1e6
        self.price_out = float(env.get("AUTORL_LLM_PRICE_OUT", "0")) / 1e6
        self.context = int(env.get("AUTORL_LLM_CONTEXT", "128000"))
        self.shell_timeout = float(env.get("AUTORL_LLM_SHELL_TIMEOUT", "900"))
        headers = {"Authorization": f"Bearer {env.get('OPENAI_API_KEY', '')}"}
        base = env.get("OPENAI_API_BASE", "https://api.openai.com/v1").rstrip("/")
        self.http = httpx.Client(base_url=base, headers=headers, timeout=600, trust_env=False)
        self.usage: dict[str, Any] = {
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost_usd": 0.0,
            "steps": 0,
            "retries": 0,
            "compactions": 0,
            "malformed_tool_calls": 0,
        }
        self.trajectory = (self.workspace / "trajectory.jsonl").open("a")
        docs = [
            (self.workspace / n).read_text()
            for n in ("description.md", "instructions.md")
            if (self.workspace / n).is_file()
        ]
        self.messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": "You are an autonomous ML engineer working in a shell through tools.\n\n"
                + "\n\n".join(docs),
            },
            {
                "role": "user",
                "content": "Begin. Improve the model's score, submit checkpoints, and call finish when done.",
            },
        ]

    # -- tools -------------------------------------------------------------------------------------------
    def _path(self, raw: str) -> Path:
        path = (self.workspace / raw).resolve()
        if path != self.workspace and self.workspace not in path.parents:
            raise ValueError(f"{raw} is outside the workspace")
        return path

    def shell(self, command: str, timeout: float) -> str:
        """Run ``command`` in its own process group; on timeout the whole group is killed (a training job it
        started in the background too), so that what the model is told stopped has stopped."""
        proc = subprocess.Popen(
            ["bash", "-lc", command],
            cwd=self.workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
            return truncate(f"exit code {proc.returncode}\n{out.decode(errors='replace')}")
        except subprocess.TimeoutExpired:
            kill_group(proc.pid, grace_s=5.0)
            # the pipe stays open while a killed child's descendants linger; read what there is, briefly
            try:
                out, _ = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                out = b""
            return truncate(
                f"timed out after {timeout:.0f} s; the command and everything it started were "
                f"killed\n{(out or b'').decode(errors='replace')}"
            )

    def tool(self, name: str, args: dict[str, Any]) -> str:
        left = self.deadline - time.time()
        if name == "run_shell":
            timeout = max(1.0, min(float(args.get("timeout_s", self.shell_timeout)), left - 5))
            return self.shell(str(args["command"]), timeout)
        if name == "read_file":
            lines = self._path(args["path"]).read_text(errors="replace").splitlines()
            start = int(args.get("offset", 0))
            return truncate("\n".join(lines[start : start + int(args.get("limit", 400))]))
        if name == "write_file":
            path = self._path(args["path"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(args["content"]))
            return f"wrote {len(str(args['content']))} characters to {args['path']}"
        if name == "edit_file":
            path = self._path(args["path"])
            text = path.read_text()
            if text.count(str(args["old"])) != 1:
                return f"error: old text occurs {text.count(str(args['old']))} times in {args['path']}, not once"
            path.write_text(text.replace(str(args["old"]), str(args["new"]), 1))
            return f"edited {args['path']}"
        if name == "list_files":
            root = self._path(args.get("path", "."))
            found = sorted(str(p.relative_to(self.workspace)) for p in root.rglob("*") if p.is_file())
            return truncate("\n".join(found[:500]) + (f"\n... {len(found) - 500} more" if len(found) > 500 else ""))
        if name == "time_left":
            return f"{max(0.0, left):.0f} seconds left"
        if name == "submit":
            from autorl.grader.client import GraderClient

            with GraderClient(self.env["GRADING_SERVER_URL"], self.env["AUTORL_TOKEN"], timeout=max(5.0, left)) as c:
                return json.dumps(c.submit(str(args["model_path"])))
        raise ValueError(f"unknown tool {name!r}")

    # -- the model ---------------------------------------------------------------------------------------
    def compact(self) -> None:
        """Drop the bodies of older tool outputs, keeping the system prompt and the last few turns."""
        for keep in (6, 1):  # first spare the last few turns; if that is not enough, all but the last message
            for m in self.messages[2:-keep]:
                if m.get("role") == "tool" and not str(m.get("content", "")).startswith("[elided"):
                    m["content"] = f"[elided to save context: {len(str(m['content']))} characters]"
            if estimate_tokens(self.messages) <= 0.6 * self.context:
                break
        self.usage["compactions"] += 1
        self.log({"event": "compaction", "estimated_tokens": estimate_tokens(self.messages)})

    def complete(self) -> dict[str, Any]:
        if estimate_tokens(self.messages) > 0.8 * self.context:
            self.compact()
        delay = 1.0
        for attempt in range(6):
            started = time.time()
            retry_after = None
            try:
                resp = self.http.post(
                    "/chat/completions",
                    json={"model": self.model, "messages": self.messages, "tools": TOOLS, "tool_choice": "auto"},
                )
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code == 200:
                    data = resp.json()
                    data["_latency_s"] = time.time() - started
                    return dict(data)
                error = f"HTTP {resp.status_code}: {resp.text[:300]}"
                retry_after = resp.headers.get("retry-after")
                if resp.status_code == 429 and "llm_budget_exhausted" in resp.text:
                    raise BudgetSpent(error, budget_kind(resp.text))  # the gateway refused: the run's budget
                if resp.status_code == 400 and "context" in resp.text.lower():
                    self.compact()
                    continue
                if resp.status_code not in (408, 409, 429) and resp.status_code < 500:
                    raise RuntimeError(error)
            self.usage["retries"] += 1
            self.log({"event": "retry", "attempt": attempt + 1, "error": error})
            wait = delay
            with contextlib.suppress(ValueError, TypeError):
                wait = max(delay, min(float(retry_after or ""), 120.0))  # the upstream's hint
            time.sleep(min(wait, max(0.0, self.deadline - time.time())))
            delay *= 2
        raise RuntimeError(f"the model API failed 6 times: {error}")

    def log(self, record: dict[str, Any]) -> None:
        self.trajectory.write(json.dumps({"time": time.time(), **record}) + "\n")
        self.trajectory.flush()

    def limit_reached(self) -> str | None:
        if self.usage["steps"] >= self.max_steps:
            return "max_steps"
        if self.usage["prompt_tokens"] + self.usage["completion_tokens"] >= self.max_tokens:
            return "max_tokens"
        if self.max_cost is not None and self.usage["cost_usd"] >= self.max_cost:
            return "max_cost"
        if time.time() > self.deadline - 10:
            return "deadline"
        return None

    def run(self) -> str:
        while (reason := self.limit_reached()) is None:
            data = self.complete()
            self.usage["steps"] += 1
            usage = data.get("usage") or {}
            p, c = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            self.usage["prompt_tokens"] += p
            self.usage["completion_tokens"] += c
            self.usage["cost_usd"] += p * self.price_in + c * self.price_out
            message = data["choices"][0]["message"]
            self.messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
            results = []
            finished = False
            for call in message.get("tool_calls") or []:
                name = call.get("function", {}).get("name", "")
                raw = call.get("function", {}).get("arguments") or "{}"
                try:
                    args = json.loads(raw)
                    if not isinstance(args, dict):
                        raise ValueError("arguments must be a JSON object")
                    output = "finished" if name == "finish" else self.tool(name, args)
                    finished = finished or name == "finish"
                except (ValueError, KeyError, TypeError, OSError) as exc:
                    if isinstance(exc, json.JSONDecodeError):
                        self.usage["malformed_tool_calls"] += 1
                    output = f"error: {type(exc).__name__}: {exc}"
                except Exception as exc:  # a tool failing (the grader refusing, say) is the model's to handle
                    output = f"error: {type(exc).__name__}: {exc}"
                results.append({"tool_call_id": call.get("id"), "name": name, "output": output})
                self.messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": output})
            if not message.get("tool_calls"):
                self.messages.append({"role": "user", "content": "Use a tool, or call finish when you are done."})
            self.log(
                {
                    "step": self.usage["steps"],
                    "message": message,
                    "tool_results": results,
                    "usage": {"prompt_tokens": p, "completion_tokens": c},
                    "latency_s": data.get("_latency_s"),
                }
            )
            if finished:
                return "finished"
        return reason


def main() -> int:
    session = Session(dict(os.environ))
    try:
        reason = session.run()
        code = 0
    except BudgetSpent as exc:
        reason, code = "llm_budget", 0
        print(f"llm agent stopped: the run's LLM budget is spent ({exc})", file=sys.stderr)
    except RuntimeError as exc:
        reason, code = f"error: {exc}", 1
        print(f"llm agent stopped: {exc}", file=sys.stderr)
    session.usage["stop_reason"] = reason
    (session.workspace / "llm_usage.json").write_text(json.dumps(session.usage, indent=2))
    session.log({"event": "end", **session.usage})
    print(f"llm agent: {reason}; {json.dumps(session.usage)}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
