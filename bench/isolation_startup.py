"""The start-up time the isolation policies add: per agent start (the agent's policy built from an operator's
PATH, bubblewrap started with the grader relay inside, ``true`` run), per scorer call (a smith ``eval.py``
scoring 1 and 50 items) and per model-written program (a HumanEval ``run_program``), here and at an earlier
revision.

    python bench/isolation_startup.py [--before REV] [--rounds 5] [--json]

Each round runs every measurement in a fresh interpreter (``--measure``), the revision's sources first on its
path (``git archive`` of ``src`` and the smith and humaneval plugins), rounds alternating between the two; the medians and the
ratio after/before are printed. Needs bubblewrap.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ("plugins/autorl-smith/src", "plugins/autorl-humaneval/src")
EVAL = "def evaluate(question, model_answer, reference_answer, **kwargs):\n    return float(model_answer == reference_answer)\n"


def _operator_home(root: Path) -> dict[str, str]:
    """A home with a tool in ~/.local/bin linked into a venv-like folder, keys beside it; its PATH first."""
    venv = root / ".local" / "share" / "pipx" / "venvs" / "tool"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    (venv / "bin" / "tool").chmod(0o755)
    (root / ".local" / "bin").mkdir(parents=True)
    (root / ".local" / "bin" / "tool").symlink_to(venv / "bin" / "tool")
    (root / ".config" / "x").mkdir(parents=True)
    (root / ".config" / "x" / "token").write_text("key\n")
    return {"HOME": str(root), "PATH": f"{root / '.local' / 'bin'}:{os.environ['PATH']}"}


def _agent_argv(work: Path, env: dict[str, str], bwrap: str) -> list[str]:
    """The agent's bubblewrap command for ``true``, built as this revision's runs/agent.py builds it."""
    import autorl.sandbox as sandbox
    from autorl.builtin.arith import Arith

    home, ws, sock = work / "autorl", work / "autorl" / "runs" / "t" / "ws", work / "sock"
    for d in (ws, sock, home / "grader" / "store", home / "hidden" / "arith", home / "datasets" / "train"):
        d.mkdir(parents=True, exist_ok=True)
    model, train = ROOT / "tests", home / "datasets" / "train"
    if hasattr(sandbox, "SandboxSpec"):  # before: the spec, and PATH handed to the command builder
        spec = sandbox.SandboxSpec(
            workspace=ws, read_only=[model, train], hidden=[home, home / "runs", *sandbox.hf_cache_dirs(),
                                                             Path(env["HOME"])],
            always_hidden=[home / "grader" / "store", home / "hidden" / "arith"], network=False, grader_port=1,
            socket_dir=sock, gpus=False)
        return list(sandbox.bwrap_argv(spec, ["true"], executable=bwrap, environ_path=env["PATH"]))
    from autorl.sandbox.agent import agent_policy

    policy = agent_policy(workspace=ws, env=env, model=model, train_dir=train, agent_files=[], benchmark=Arith(),
                          autorl_home=home, runs_root=home / "runs", store_dir=home / "grader" / "store",
                          hidden_dir=home / "hidden" / "arith", network="off", relay=sandbox.Relay(1, sock),
                          environ=env)
    return sandbox.launch(policy, ["true"], mode="bwrap", executable=bwrap).argv


def _score(folder: Path, n: int) -> float:
    from autorl_smith.scorer import Request, score_all

    requests = [Request(f"q{k}", "a", "a") for k in range(n)]
    start = time.perf_counter()
    if "eval_py" in inspect.signature(score_all).parameters:  # before: eval.py and its folder
        scored = score_all(folder / "eval.py", folder, requests, 30.0)  # type: ignore[call-arg,arg-type]
    else:
        scored = score_all(folder, requests, 30.0)
    took = time.perf_counter() - start
    assert [s.score for s in scored] == [1.0] * n, scored
    return took


def measure() -> dict[str, float]:
    """One round, in this interpreter: what each start takes, in seconds."""
    from autorl.sandbox import bwrap_available

    bwrap = bwrap_available()[0]
    assert bwrap, "bubblewrap cannot run here"
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = _operator_home(work / "home")
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            start = time.perf_counter()
            argv = _agent_argv(work, env, bwrap)
            out["agent_policy_s"] = time.perf_counter() - start
            start = time.perf_counter()
            proc = subprocess.run(argv, env=env, capture_output=True, timeout=60)
            out["agent_sandbox_start_s"] = time.perf_counter() - start
            assert proc.returncode == 0, proc.stderr
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        folder = work / "bench" / "f"
        (folder / "data").mkdir(parents=True)
        (folder / "eval.py").write_text(EVAL)
        for n in (1, 50):
            out[f"scorer_{n}_items_s"] = _score(folder, n)
    from autorl_humaneval.sandbox import run_program

    start = time.perf_counter()
    assert run_program("print('ok')").passed
    out["program_s"] = time.perf_counter() - start
    return out


def _sources(rev: str, dest: Path) -> list[str]:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src", *PLUGINS], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return [str(dest / "src"), *(str(dest / p) for p in PLUGINS)]


def _round(paths: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]),
           "AUTORL_HOME": tempfile.mkdtemp(prefix="autorl-bench-")}
    proc = subprocess.run([sys.executable, __file__, "--measure"], env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="a git revision to time side by side (e.g. main)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return
    now = [str(ROOT / "src"), *(str(ROOT / p) for p in PLUGINS)]
    with tempfile.TemporaryDirectory() as tmp:
        before = _sources(args.before, Path(tmp)) if args.before else None
        rounds: dict[str, list[dict[str, float]]] = {"after": [], "before": []}
        for _ in range(args.rounds):
            rounds["after"].append(_round(now))
            if before:
                rounds["before"].append(_round(before))
    result: dict[str, dict[str, float]] = {}
    for key in rounds["after"][0]:
        row = {"after": statistics.median(r[key] for r in rounds["after"])}
        if rounds["before"]:
            row["before"] = statistics.median(r[key] for r in rounds["before"])
            row["added"] = row["after"] - row["before"]
            row["ratio"] = row["after"] / row["before"]
        result[key] = {k: round(v, 4) for k, v in row.items()}
    if args.json:
        print(json.dumps({"rounds": args.rounds, "before": args.before, "medians": result}, indent=2))
        return
    print(f"medians of {args.rounds} rounds (seconds)" + (f", before = {args.before}" if args.before else ""))
    for key, row in result.items():
        print(f"{key:<24} " + "  ".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
