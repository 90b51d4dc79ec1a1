"""Calls a folder's ``eval.py`` in a separate process (it is third-party code), with a timeout per item.

The process runs under the scorer policy (:mod:`autorl.sandbox.scorer`): in a scratch copy of the folder, the
only place it writes, with no network, no home, a pid namespace of its own and a plain environment; the folder is
hashed before and checked after (a folder that changed is refused). The child imports ``eval.py`` once with its stdout redirected to stderr, so whatever it prints cannot
corrupt the protocol: one JSON request a line in, one JSON reply a line out, on the original stdout.
Each request is scored in a fresh fork of that child, which holds neither end of the protocol: it hands
its result to the child through a pipe of its own, so ``evaluate`` (and any model output it executes)
can neither write a reply, nor leave patches (to ``evaluate``, builtins, the module) for later items,
nor answer for another item; a fork that exits before ``evaluate`` returns scores 0. Every reply
carries the request's random id, and a reply with another id is dropped. A hang kills the child,
scores that item 0 with the reason, and a fresh child takes the remaining items, in a fresh copy. The copy's
``eval.py`` is checked against the bytes it had when the folder was discovered before every (re)start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autorl.sandbox import FolderChanged, ScratchFolder

CHILD = r"""
import importlib.util, json, math, os, sys
out = os.fdopen(os.dup(1), "w", buffering=1)
requests = os.fdopen(os.dup(0), "r")
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.dup2(2, 1)
sys.stdout = sys.stderr
CAP = 65536
spec = importlib.util.spec_from_file_location("smith_eval", sys.argv[1])
module = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
    evaluate = module.evaluate
except BaseException as exc:
    out.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"[:500]}) + "\n")
    sys.exit(0)
out.write(json.dumps({"ready": True}) + "\n")

def score_in_fork(req):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fork: no protocol descriptors, one pipe for its result
        try:
            os.close(r)
            os.close(out.fileno())
            os.close(requests.fileno())
            value = evaluate(req["question"], req["model_answer"], req["reference_answer"], **req.get("kwargs", {}))
            if type(value) not in (int, float, bool):
                reply = {"error": f"evaluate returned a {type(value).__name__}, not a number"}
            else:
                value = float(value)
                if math.isnan(value) or not 0.0 <= value <= 1.0:
                    reply = {"error": f"evaluate returned {value!r}, not a number in [0, 1]"}
                else:
                    reply = {"score": value}
        except BaseException as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        try:
            os.write(w, (json.dumps(reply) + "\n").encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while len(data) <= CAP:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    try:
        os.kill(pid, 9)
    except OSError:
        pass
    os.waitpid(pid, 0)
    lines = data.split(b"\n")
    if len(lines) != 2 or lines[1] or len(data) > CAP:  # exactly one line, as the fork's own code writes it
        return {"error": "evaluate exited before returning" if not data else "evaluate wrote more than its result"}
    try:
        reply = json.loads(lines[0])
    except ValueError:
        return {"error": "evaluate's result is not JSON"}
    if type(reply) is not dict:
        return {"error": "evaluate's result is not JSON"}
    if "score" in reply and type(reply["score"]) is float and 0.0 <= reply["score"] <= 1.0:
        return {"score": reply["score"]}
    return {"error": str(reply.get("error", "evaluate's result has no score"))[:500]}

for line in requests:
    req = json.loads(line)
    out.write(json.dumps({"id": req["id"], **score_in_fork(req)}) + "\n")
"""


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Scored:
    score: float
    error: str | None = None


@dataclass(frozen=True)
class Request:
    question: str
    model_answer: str
    reference_answer: str


class EvalProcess:
    """``eval.py`` of ``folder`` in its process under the scorer policy, (re)started in a fresh scratch copy.
    ``mode`` ``none``: no sandbox (in the agent's own process); ``masked``: folders it must not see."""

    def __init__(
        self,
        folder: Path,
        timeout_s: float,
        digest: str | None = None,
        *,
        mode: str | None = None,
        masked: Sequence[Path] = (),
    ) -> None:
        self.timeout_s = timeout_s
        self.digest = digest  # eval.py's sha256 when the folder was discovered, checked before every start
        self.scratch = ScratchFolder(folder, mode=mode, masked=masked)
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> str | None:
        try:
            copy = self.scratch.fresh()
            if self.digest is not None and file_digest(copy / "eval.py") != self.digest:
                return "eval.py changed since the folder was prepared"
        except FolderChanged as exc:
            return str(exc)
        except OSError as exc:
            return f"eval.py cannot be read: {exc.strerror}"
        run = self.scratch.launch([sys.executable, "-c", CHILD, str(copy / "eval.py")])
        self.proc = subprocess.Popen(
            run.argv,
            cwd=run.cwd,
            env=run.env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        hello = self._read(max(self.timeout_s, 30.0))
        if hello is None:
            self.close()
            return "eval.py did not load in time"
        if "fatal" in hello:
            self.close()
            return f"eval.py failed to load: {hello['fatal']}"
        return None

    def _read(self, timeout: float, request_id: str | None = None) -> dict[str, object] | None:
        assert self.proc is not None and self.proc.stdout is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline(1 << 20)
            if not line:
                return None
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and (request_id is None or data.get("id") == request_id):
                return data
        return None

    def score(self, req: Request) -> Scored:
        if self.proc is None or self.proc.poll() is not None:
            problem = self._start()
            if problem:
                return Scored(0.0, problem)
        assert self.proc is not None and self.proc.stdin is not None
        request_id = secrets.token_hex(16)
        try:
            self.proc.stdin.write(json.dumps({"id": request_id, **req.__dict__}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return Scored(0.0, "eval.py process died")
        reply = self._read(self.timeout_s, request_id)
        if reply is None:
            self.close()
            return Scored(0.0, f"evaluate did not answer within {self.timeout_s:.0f} s")
        if "error" in reply:
            return Scored(0.0, str(reply["error"]))
        score = reply.get("score")
        if type(score) is not float or not 0.0 <= score <= 1.0:
            return Scored(0.0, "eval.py's reply has no score")
        return Scored(score)

    def close(self) -> None:
        """End the process (a later :meth:`score` starts another, in a fresh copy)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()
            self.proc = None

    def finish(self) -> None:
        """End the process and drop its copy; :class:`~autorl.sandbox.scorer.FolderChanged` when the folder
        changed meanwhile."""
        self.close()
        self.scratch.close()


def score_all(
    folder: Path,
    requests: Sequence[Request],
    timeout_s: float = 30.0,
    digest: str | None = None,
    *,
    mode: str | None = None,
    masked: Sequence[Path] = (),
) -> list[Scored]:
    """Each request scored by ``folder``'s ``eval.py`` in one scorer process (a fresh one after a hang)."""
    worker = EvalProcess(folder, timeout_s, digest, mode=mode, masked=masked)
    try:
        return [worker.score(r) for r in requests]
    finally:
        worker.finish()
