"""`autorl sweep`: spec expansion and run keys, bad input, resume after `kill -9`, retry accounting, GPU
assignment and the report's numbers. Runs here are a fake `autorl run` (AUTORL_SWEEP_RUN_PROGRAM) or a fake
executor plugin; tests/test_sweep_e2e.py runs real ones."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .conftest import cli

FAKE_RUN = textwrap.dedent('''\
    """A stand-in for `autorl run`: records what it got, sleeps, prints a row (improvement from agent and seed)."""
    import json, os, signal, sys, time
    args = sys.argv[2:]
    opt = lambda name: args[args.index(name) + 1] if name in args else None
    log = os.environ["FAKE_RUN_LOG"]
    start = time.time()
    def stopped(signum, frame):
        with open(log, "a") as f:
            f.write(json.dumps({"stopped": os.getpid(), "seed": opt("--seed")}) + "\\n")
        sys.exit(130)
    signal.signal(signal.SIGINT, stopped)
    time.sleep(float(os.environ.get("FAKE_RUN_SLEEP", "0")))
    while os.path.exists(os.environ.get("FAKE_RUN_HOLD") or "/nonexistent"):  # held until the test lets go
        time.sleep(0.1)
    agent, seed = os.path.basename(opt("--agent")), int(opt("--seed"))
    improvement = {"a": 10.0, "b": 4.0}.get(agent, 0.0) + 2.0 * seed
    row = {"run_id": f"fake-{agent}-{seed}-{os.getpid()}", "timestamp": "2026-01-01 00:00:00", "task": opt("--task"),
           "agent": agent, "base_model": opt("--model"), "baseline": 20.0, "best_score": 20.0 + improvement,
           "improvement": improvement, "improvement_ci95": [improvement - 1, improvement + 1], "p_value": 0.01,
           "submissions": 1, "duration_s": 0.1, "success": True, "workspace": "/nonexistent", "seed": seed,
           "config_hash": "cfg", "end_reason": "agent finished"}
    for key in filter(None, os.environ.get("FAKE_RUN_DROP", "").split(",")):  # an older version's row, a hostile one
        row.pop(key)
    with open(log, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "seed": seed, "agent": agent, "start": start, "end": time.time(),
                            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "gpus": opt("--gpus"),
                            "home": os.environ["AUTORL_HOME"]}) + "\\n")
    print(json.dumps(row))
''')


@pytest.fixture
def fake_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    log = tmp_path / "fake_runs.jsonl"
    monkeypatch.setenv("AUTORL_SWEEP_RUN_PROGRAM", f"{sys.executable} {script}")
    monkeypatch.setenv("FAKE_RUN_LOG", str(log))
    monkeypatch.setenv("AUTORL_SWEEP_SCRATCH", str(tmp_path / "scratch"))
    return log


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A checkpoint directory (the fake runs never load it)."""
    from .conftest import write_stub_checkpoint

    return write_stub_checkpoint(tmp_path / "base-model")


def _agents(root: Path, *names: str) -> list[str]:
    out = []
    for name in names:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(json.dumps({"name": name, "start": "start.sh"}))
        (folder / "start.sh").write_text("#!/usr/bin/env bash\necho hi\n")
        out.append(str(folder))
    return out


def _runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [r for r in (json.loads(line) for line in log.read_text().splitlines()) if "pid" in r]


def _spec(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": "study",
        "agent": _agents(tmp_path / "agents", "a", "b"),
        "task": "arith",
        "model": "autorl:tiny",
        "seed": [0, 1],
        "timeout": 30,
        "limit": 4,
        **extra,
    }


# ---- spec and keys -------------------------------------------------------------------------------------------


def test_matrix_include_exclude_and_stable_keys(home: Path, tmp_path: Path, model: Path) -> None:
    from autorl.sweep import plan

    agents = _agents(tmp_path / "agents", "a", "b")
    toml = tmp_path / "s.toml"
    toml.write_text(
        f'name = "s"\nagent = {json.dumps(agents)}\ntask = "arith"\nmodel = "{model}"\n'
        'seed = [0, 1]\ntimeout = 30\n[[include]]\nseed = 7\nagent = "' + agents[0] + '"\n'
        '[[exclude]]\nagent = "' + agents[1] + '"\nseed = 1\n'
    )
    study = plan(toml)
    assert [(Path(c["agent"]).name, c["seed"]) for c in study.cells] == [("a", 0), ("a", 1), ("b", 0), ("a", 7)]
    keys = [c.run_key for c in study.cells]
    assert len(set(keys)) == 4
    # the same study written in another order has the same keys
    reordered = tmp_path / "r.yaml"
    reordered.write_text(
        json.dumps(
            {
                "timeout": 30,
                "exclude": [{"seed": 1, "agent": agents[1]}],
                "include": [{"agent": agents[0], "seed": 7}],
                "seed": [0, 1],
                "model": str(model),
                "task": "arith",
                "agent": agents,
                "name": "s",
            }
        )
    )
    assert sorted(c.run_key for c in plan(reordered).cells) == sorted(keys)
    # any field that changes the result changes the key: timeout, limit, an agent's files, the model's files
    spec = {"agent": agents[0], "task": "arith", "model": str(model), "timeout": 30}
    base = plan(spec).cells[0].run_key
    assert plan({**spec, "timeout": 31}).cells[0].run_key != base
    assert plan({**spec, "limit": 3}).cells[0].run_key != base
    assert plan({**spec, "network": "off"}).cells[0].run_key != base
    assert plan({**spec, "agent_env": {"X": "1"}}).cells[0].run_key != base
    (Path(agents[0]) / "start.sh").write_text("#!/usr/bin/env bash\necho changed\n")
    assert plan(spec).cells[0].run_key != base


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"agent": "example", "task": "arithh", "model": "autorl:tiny", "timeout": 5},
            "spec: task 'arithh': unknown benchmark 'arithh'; did you mean 'arith'?",
        ),
        (
            {"agent": "exampel", "task": "arith", "model": "autorl:tiny", "timeout": 5},
            "spec: agent 'exampel': unknown agent 'exampel'; did you mean 'example'?",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:huge", "timeout": 5},
            "spec: model 'autorl:huge' is neither a local directory",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:tiny", "timout": 5},
            "spec: unknown option 'timout'; did you mean 'timeout'?",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 5, "seed": "one"},
            "spec: seed must be an integer, not 'one'",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": -1},
            "spec: timeout must be a positive number",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 5, "seed": [1, 1]},
            "spec: the cell example / arith / autorl:tiny / seed 1 appears twice",
        ),
        (
            {"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 5, "sandbox": "docker"},
            "spec: sandbox must be one of auto, bwrap, none",
        ),
    ],
)
def test_bad_specs_are_one_line_errors_naming_the_field(
    home: Path, tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(spec))
    proc = cli("sweep", "run", str(path), "--dry-run", env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"error: {message}") and proc.stderr.count("\n") == 1, proc.stderr


def test_a_key_written_twice_and_more_gpus_than_there_are(home: Path, tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("agent: example\ntask: arith\nseed: 1\nmodel: autorl:tiny\nseed: 2\ntimeout: 5\n")
    proc = cli("sweep", "run", str(path), "--dry-run", env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2 and proc.stderr == "error: spec: key 'seed' appears twice (line 5)\n"
    toml = tmp_path / "twice.toml"
    toml.write_text('agent = "example"\nseed = 1\nseed = 2\n')
    proc = cli("sweep", "run", str(toml), env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2 and proc.stderr.startswith("error: spec ") and "Traceback" not in proc.stderr
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps({"agent": "example", "task": "arith", "model": "autorl:tiny", "timeout": 5, "gpus": 8}))
    proc = cli("sweep", "run", str(gpus), "--gpus", "0-3", env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: cell example / arith / autorl:tiny / seed 0: gpus = 8 per run, but the local "
        "executor has GPUs 0, 1, 2, 3\n"
    )
    proc = cli("sweep", "run", str(gpus), "--executor", "slurmm", env={"AUTORL_HOME": str(home)})
    assert proc.returncode == 2 and proc.stderr == "error: unknown executor 'slurmm'; did you mean 'slurm'?\n"


# ---- local executor with a fake run --------------------------------------------------------------------------


def test_gpus_are_handed_out_disjointly(
    home: Path, tmp_path: Path, fake_run: Path, monkeypatch: pytest.MonkeyPatch, model: Path
) -> None:
    from autorl.sweep import sweep

    monkeypatch.setenv("FAKE_RUN_SLEEP", "1.5")
    spec = {**_spec(tmp_path), "agent": _agents(tmp_path / "agents", "a")[0], "gpus": 2, "model": str(model)}
    sweep(spec, executor_options={"gpus": "0-3"})
    runs = _runs(fake_run)
    assert len(runs) == 2
    sets = [set(r["cuda"].split(",")) for r in runs]
    assert all(len(s) == 2 for s in sets) and not sets[0] & sets[1] and sets[0] | sets[1] == {"0", "1", "2", "3"}
    assert runs[0]["start"] < runs[1]["end"] and runs[1]["start"] < runs[0]["end"]  # at the same time
    for r, s in zip(runs, sets, strict=True):  # the grader gets the run's last GPU, the agent the other
        agent, grader = sorted(s)
        assert r["gpus"] == f"agent={agent},grader={grader}"
        assert r["home"] != str(home)  # a node-local scratch home, never the shared ledger


def test_one_gpu_holds_several_runs_at_once_with_runs_per_gpu(
    home: Path, tmp_path: Path, fake_run: Path, monkeypatch: pytest.MonkeyPatch, model: Path
) -> None:
    from autorl.errors import UsageError
    from autorl.sweep import sweep

    monkeypatch.setenv("FAKE_RUN_SLEEP", "1.5")
    spec = {
        **_spec(tmp_path),
        "agent": _agents(tmp_path / "agents", "a")[0],
        "gpus": 1,
        "model": str(model),
        "seed": [0, 1, 2],
    }
    sweep(spec, executor_options={"gpus": "0,1", "runs_per_gpu": 2})
    runs = sorted(_runs(fake_run), key=lambda r: r["start"])
    assert len(runs) == 3
    # three at once over two GPUs: each GPU holds one or two of them (never three on one)
    assert max(r["start"] for r in runs) < min(r["end"] for r in runs)
    assert sorted(r["cuda"] for r in runs) in (["0", "0", "1"], ["0", "1", "1"])
    for bad in (0, "2", True):
        with pytest.raises(UsageError, match="runs_per_gpu must be a positive integer"):
            sweep({**spec, "name": f"bad{bad}"}, executor_options={"gpus": "0", "runs_per_gpu": bad})


def test_kill_9_of_the_coordinator_then_resume(home: Path, tmp_path: Path, fake_run: Path, model: Path) -> None:
    spec = tmp_path / "study.json"
    spec.write_text(json.dumps({**_spec(tmp_path), "model": str(model)}))
    env = {"AUTORL_HOME": str(home), "FAKE_RUN_SLEEP": "4"}
    full_env = {**os.environ, **env}
    coordinator = subprocess.Popen(
        [sys.executable, "-c", "from autorl.cli import main; main()", "sweep", "run", str(spec), "--slots", "2"],
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    keys = home / "sweeps" / "study" / "keys"
    deadline = time.time() + 120
    # wait until two keys are done and the next two are running, then kill the coordinator outright
    while time.time() < deadline:
        done = list(keys.glob("*/a1/outcome.json"))
        started = list(keys.glob("*/a1/node.json"))
        if len(done) == 2 and len(started) == 4:
            break
        time.sleep(0.2)
    else:
        coordinator.kill()
        pytest.fail("the study never got half way")
    coordinator.send_signal(signal.SIGKILL)
    coordinator.wait()
    orphans = [
        json.loads(p.read_text())["pid"] for p in keys.glob("*/a1/job.json") if not (p.parent / "outcome.json").exists()
    ]
    assert len(orphans) == 2 and all(Path(f"/proc/{pid}").exists() for pid in orphans)
    proc = cli("sweep", "run", str(spec), "--slots", "2", "--json", env={**env, "FAKE_RUN_SLEEP": "0"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    states = {k.name: sorted(p.name for p in k.iterdir()) for k in keys.iterdir()}
    assert sorted(len(v) for v in states.values()) == [1, 1, 2, 2]  # no finished key rerun
    for folder in keys.glob("*/a1"):
        outcome = json.loads((folder / "outcome.json").read_text())
        if (folder.parent / "a2").exists():
            # stopped by the new coordinator: the worker records the signal first (or the coordinator, the loss)
            assert outcome["kind"] == "infra"
            assert outcome["reason"] in ("worker stopped by SIGTERM", "interrupted: the coordinator was gone")
            assert json.loads((folder.parent / "a2" / "outcome.json").read_text())["kind"] == "result"
    # the orphaned runs were stopped (SIGINT to the run: it could clean up), and each key ran to one result
    for pid in orphans:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    stopped = [json.loads(line) for line in fake_run.read_text().splitlines() if "stopped" in line]
    assert len(stopped) == 2
    status = json.loads(cli("sweep", "status", "study", "--json", env=env, check=True).stdout)
    assert sorted(r["attempts"] for r in status) == [1, 1, 2, 2] and {r["state"] for r in status} == {"done"}
    # the ledger: one row per key, whatever was interrupted and ingested again
    cli("sweep", "ingest", "study", env=env, check=True)
    rows = json.loads(cli("results", "--json", env=env, check=True).stdout)
    assert len(rows) == 4 and len({r["run_key"] for r in rows}) == 4
    sweep_id = json.loads(next(keys.glob("*/a1/payload.json")).read_text())["sweep_id"]
    assert {r["run_id"] for r in rows} == {f"{k}-{sweep_id}-a{len(v)}" for k, v in states.items()}


class FlakyExecutor:
    """Loses the first attempt of every key (as a node that died would); places the next as a no-op run."""

    name: ClassVar[str] = "flaky"


def _flaky_plugin() -> Any:
    from autorl.hookspecs import hookimpl
    from autorl.sweep import Executor

    class Flaky(Executor):
        name: ClassVar[str] = "flaky"
        seen: ClassVar[set[str]] = set()

        def start(self, launches: list[Any]) -> list[dict[str, Any] | None]:
            from autorl.sweep.store import read_json, write_json

            jobs = []
            for launch in launches:
                payload = read_json(launch.attempt_dir / "payload.json")
                key = payload["run_key"]
                if key in self.seen:
                    seed = payload["options"]["seed"]
                    row = {
                        "run_id": f"{key}-a{payload['attempt']}",
                        "timestamp": "2026-01-01 00:00:00",
                        "task": "arith",
                        "agent": "a",
                        "base_model": "m",
                        "success": seed != 1,
                        "improvement": 5.0 if seed != 1 else None,
                        "seed": seed,
                        "config_hash": "c",
                        "run_key": key,
                        "sweep": payload["sweep"],
                        "end_reason": "agent finished" if seed != 1 else "no scored submission",
                    }
                    write_json(launch.attempt_dir / "result.json", {"row": row, "submissions": [], "meta": {}})
                    write_json(
                        launch.attempt_dir / "outcome.json",
                        {"kind": "result", "success": row["success"], "reason": row["end_reason"]},
                    )
                self.seen.add(key)
                jobs.append({"executor": "flaky", "key": key})
            return jobs

        def poll(self, job: dict[str, Any]) -> str | None:
            return "node lost (fake)"

    class Plugin:
        @hookimpl
        def register_executors(self, register: Any) -> None:
            register(Flaky)

    return Plugin()


def test_lost_jobs_are_retried_and_bad_outcomes_are_not(home: Path, tmp_path: Path, model: Path) -> None:
    from autorl.plugins.loader import create_plugin_manager, set_plugin_manager
    from autorl.sweep import get_executors, sweep

    pm = create_plugin_manager(entry_points=False)
    pm.register(_flaky_plugin(), name="flaky-plugin")
    previous = set_plugin_manager(pm)
    try:
        assert get_executors()["flaky"][1] == "flaky-plugin"
        spec = {
            **_spec(tmp_path),
            "agent": _agents(tmp_path / "agents", "a")[0],
            "model": str(model),
            "seed": [0, 1, 2],
        }
        report = sweep(spec, executor="flaky")
        keys = home / "sweeps" / "study" / "keys"
        for key in keys.iterdir():
            attempts = sorted(key.iterdir())
            assert [a.name for a in attempts] == ["a1", "a2"]  # one loss, one result: a failed run is not retried
            first = json.loads((attempts[0] / "outcome.json").read_text())
            assert first["kind"] == "infra" and first["reason"] == "node lost (fake)"
        cell = report["cells"][0]
        assert cell["runs"] == 3 and cell["failures"] == 1 and cell["success_rate"] == pytest.approx(2 / 3)
        assert cell["values"] == [5.0, 0.0, 5.0] or sorted(cell["values"]) == [0.0, 5.0, 5.0]
        assert all(r["attempts"] == 2 and r["infra_failures"] == ["node lost (fake)"] for r in cell["per_run"])
        # the loader reads the same report back from the study's files, running nothing
        from autorl.sweep import StudyResult, load

        loaded = load("study")
        assert isinstance(report, StudyResult) and loaded == report and len(loaded.to_records()) == 3
        # with no retry left, a lost key is reported as having no result, with its reasons
        Flaky = get_executors()["flaky"][0]
        Flaky.seen.clear()  # type: ignore[attr-defined]
        report = sweep({**spec, "name": "strict", "retries": 0}, executor="flaky")
        assert report["cells"] == [] and len(report["missing"]) == 3
        assert all(m["status"] == "gave up" and m["reasons"] == ["node lost (fake)"] for m in report["missing"])
    finally:
        set_plugin_manager(previous)


def test_a_registered_executor_must_subclass_executor() -> None:
    from autorl.hookspecs import hookimpl
    from autorl.plugins.loader import create_plugin_manager
    from autorl.sweep import get_executors

    class Plugin:
        @hookimpl
        def register_executors(self, register: Any) -> None:
            register(FlakyExecutor)

    pm = create_plugin_manager(entry_points=False)
    pm.register(Plugin(), name="bad-plugin")
    with pytest.raises(
        TypeError,
        match=r"bad-plugin \(plugin bad-plugin\) registers .* as an executor, which is not a "
        r"subclass of autorl\.sweep\.Executor",
    ):
        get_executors(pm)


# ---- the report ----------------------------------------------------------------------------------------------


def test_report_matches_numbers_computed_by_hand() -> None:
    from scipy import stats

    from autorl.sweep.report import build_report

    def row(agent: str, seed: int, imp: float | None, cfg: str = "c") -> dict[str, Any]:
        return {
            "run_id": f"{agent}{seed}{cfg}",
            "task": "t",
            "agent": agent,
            "base_model": "m",
            "config_hash": cfg,
            "seed": seed,
            "improvement": imp,
            "success": imp is not None,
            "improvement_ci95": None,
        }

    rows = [
        row("a", 0, 10.0),
        row("a", 1, 14.0),
        row("a", 2, None),
        row("b", 0, 4.0),
        row("b", 1, 8.0),
        row("b", 2, 3.0),
        row("b", 3, 1.0, cfg="other"),
    ]
    report = build_report(rows)
    a = next(c for c in report["cells"] if c["agent"] == "a")
    mean, sd = 8.0, math.sqrt(((10 - 8) ** 2 + (14 - 8) ** 2 + (0 - 8) ** 2) / 2)
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert a["mean"] == pytest.approx(mean) and a["ci95"] == pytest.approx([mean - half, mean + half])
    assert a["failures"] == 1 and a["success_rate"] == pytest.approx(2 / 3)
    assert len([c for c in report["cells"] if c["agent"] == "b"]) == 2  # another config hash: not pooled
    (diff,) = report["comparisons"]
    d = [10 - 4, 14 - 8, 0 - 3]
    dm = sum(d) / 3
    dhalf = stats.t.ppf(0.975, 2) * math.sqrt(sum((x - dm) ** 2 for x in d) / 2) / math.sqrt(3)
    assert diff["pairs"] == 3 and diff["mean_difference"] == pytest.approx(dm)
    assert diff["ci95"] == pytest.approx([dm - dhalf, dm + dhalf])


def test_two_by_two_report_from_the_fake_runs(home: Path, tmp_path: Path, fake_run: Path, model: Path) -> None:
    spec = tmp_path / "study.toml"
    agents = _agents(tmp_path / "agents", "a", "b")
    spec.write_text(
        f'name = "two"\nagent = {json.dumps(agents)}\ntask = "arith"\nmodel = "{model}"\nseed = [0, 1]\ntimeout = 30\n'
    )
    env = {"AUTORL_HOME": str(home)}
    dry = json.loads(cli("sweep", "run", str(spec), "--dry-run", "--json", env=env, check=True).stdout)
    assert [r["state"] for r in dry] == ["queued"] * 4
    cli("sweep", "run", str(spec), "--slots", "2", env=env, check=True)
    dry = json.loads(cli("sweep", "run", str(spec), "--dry-run", "--json", env=env, check=True).stdout)
    assert [r["state"] for r in dry] == ["done"] * 4
    assert "arith" in (home / "sweeps" / "two" / "card.md").read_text()  # `sweep run` leaves the study's card
    report = json.loads(cli("sweep", "report", "two", "--format", "json", env=env, check=True).stdout)
    files = [json.loads(p.read_text())["row"] for p in (home / "sweeps" / "two" / "keys").glob("*/a1/result.json")]
    for agent, cell in ((c["agent"], c) for c in report["cells"]):
        values = [r["improvement"] for r in files if r["agent"] == agent]
        assert sorted(cell["values"]) == sorted(values) and cell["mean"] == pytest.approx(sum(values) / 2)
    (diff,) = report["comparisons"]
    assert diff["mean_difference"] == pytest.approx(6.0) and diff["ci95"] == pytest.approx([6.0, 6.0])
    md = cli("sweep", "report", "two", "--format", "markdown", env=env, check=True).stdout
    assert md.startswith("| task | model | agent |") and "a - b on arith" in md
    # the README's notebook line, in a fresh interpreter: `autorl.sweep` is the callable study package
    script = (
        "import json, autorl; r = autorl.sweep.load('two'); "
        "print(json.dumps({'cells': len(r['cells']), 'records': len(r.to_records()), "
        "'callable': callable(autorl.sweep)}))"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout) == {"cells": 2, "records": 4, "callable": True}
    # run again: nothing is rerun
    before = len(_runs(fake_run))
    cli("sweep", "run", str(spec), "--slots", "2", env=env, check=True)
    assert len(_runs(fake_run)) == before == 4


# ---- progress of a run ---------------------------------------------------------------------------------------


def test_each_submission_is_printed_once_as_it_lands() -> None:
    from autorl.runs.progress import SubmissionPrinter

    subs: list[dict[str, Any]] = [{"submission_id": 1, "status": "running"}]
    lines: list[str] = []
    deadline = time.time() + 100
    printer = SubmissionPrinter(lambda: {"submissions": subs}, deadline, lines.append)
    assert printer.poll_once() == []
    subs[0] = {
        "submission_id": 1,
        "status": "done",
        "score": 42.5,
        "ci95": [38.1, 46.9],
        "improvement": 5.0,
        "improvement_ci95": [1.0, 9.0],
    }
    subs.append({"submission_id": 2, "status": "failed", "error": "no config.json"})
    printer.poll_once()
    printer.poll_once()
    assert len(lines) == 2
    assert lines[0].startswith("submission 1: dev 42.50 (95% CI 38.10-46.90), improvement +5.00 [1.00, 9.00]; ")
    assert lines[0].endswith(" s left") and 95 <= int(lines[0].split("; ")[1].split()[0]) <= 100
    assert lines[1].startswith("submission 2: no config.json; ")


def test_a_result_the_ledger_cannot_hold_is_one_line_and_the_study_goes_on(
    home: Path, tmp_path: Path, fake_run: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "study.toml"
    spec.write_text(
        f'name = "old"\nagent = {json.dumps(_agents(tmp_path / "agents", "a"))}\ntask = "arith"\n'
        f'model = "{model}"\nseed = [0, 1]\ntimeout = 30\n'
    )
    proc = cli("sweep", "run", str(spec), "--slots", "1", env={"AUTORL_HOME": str(home), "FAKE_RUN_DROP": "timestamp"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "not recorded in the ledger" in line]
    assert len(said) == 2 and all("its row has no timestamp" in line for line in said), proc.stderr
    report = json.loads(
        cli("sweep", "report", str(spec), "--format", "json", env={"AUTORL_HOME": str(home)}, check=True).stdout
    )
    assert report["cells"][0]["runs"] == 2  # the study's own files still count both
