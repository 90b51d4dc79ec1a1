"""Calls a folder's ``eval.py`` in a separate process (it is third-party code), with a timeout per item.

The child imports ``eval.py`` with its stdout redirected to stderr, so whatever it prints cannot corrupt
the protocol: one JSON request a line in, one JSON reply a line out, on the original stdout. A hang
kills the child, scores that item 0 with the reason, and a fresh child takes the remaining items.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

CHILD = r'''
import importlib.util, json, math, os, sys
out = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
spec = importlib.util.spec_from_file_location("smith_eval", sys.argv[1])
module = importlib.util.module_from_spec(spec)
try:
    spec.loader.exec_module(module)
    evaluate = module.evaluate
except BaseException as exc:
    out.write(json.dumps({"fatal": f"{type(exc).__name__}: {exc}"}) + "\n")
    sys.exit(0)
out.write(json.dumps({"ready": True}) + "\n")
for line in sys.stdin:
    req = json.loads(line)
    try:
        value = float(evaluate(req["question"], req["model_answer"], req["reference_answer"], **req.get("kwargs", {})))
        if math.isnan(value) or not 0.0 <= value <= 1.0:
            reply = {"error": f"evaluate returned {value!r}, not a number in [0, 1]"}
        else:
            reply = {"score": value}
    except BaseException as exc:
        reply = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    out.write(json.dumps(reply) + "\n")
'''


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
    def __init__(self, eval_py: Path, cwd: Path, timeout_s: float) -> None:
        self.eval_py, self.cwd, self.timeout_s = eval_py, cwd, timeout_s
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> str | None:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(self.eval_py)], cwd=self.cwd, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        hello = self._read(max(self.timeout_s, 30.0))
        if hello is None:
            self.close()
            return "eval.py did not load in time"
        if "fatal" in hello:
            self.close()
            return f"eval.py failed to load: {hello['fatal']}"
        return None

    def _read(self, timeout: float) -> dict[str, object] | None:
        assert self.proc is not None and self.proc.stdout is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                return None
            try:
                data = json.loads(line)
                if isinstance(data, dict):
                    return data
            except ValueError:
                continue
        return None

    def score(self, req: Request) -> Scored:
        if self.proc is None or self.proc.poll() is not None:
            problem = self._start()
            if problem:
                return Scored(0.0, problem)
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(req.__dict__) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.close()
            return Scored(0.0, "eval.py process died")
        reply = self._read(self.timeout_s)
        if reply is None:
            self.close()
            return Scored(0.0, f"evaluate did not answer within {self.timeout_s:.0f} s")
        if "error" in reply:
            return Scored(0.0, str(reply["error"]))
        return Scored(float(reply["score"]))  # type: ignore[arg-type]

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, 9)
            self.proc.wait()
            self.proc = None


def score_all(eval_py: Path, cwd: Path, requests: Sequence[Request], timeout_s: float = 30.0) -> list[Scored]:
    worker = EvalProcess(eval_py, cwd, timeout_s)
    try:
        return [worker.score(r) for r in requests]
    finally:
        worker.close()
