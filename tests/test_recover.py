"""Telling a live run from a lost one, and the pieces that end a run's processes with their orchestrator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autorl.procs.lease import HEARTBEAT_FILE, LOST_AT_KEY, Heartbeat, Lease, watch_lease
from autorl.record.ledger import Ledger
from autorl.runs.liveness import in_flight, lost_runs, orchestrator_status, run_status
from autorl.runs.lost import LOST_REASON
from autorl.runs.recover import recover


def _beat(store: Path, **fields: object) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    path = store / HEARTBEAT_FILE
    path.write_text(json.dumps({"host": "elsewhere", "pid": 1, "pid_start": 0, "interval_s": 5.0, **fields}))
    return path


def test_a_heartbeat_says_live_or_lost(tmp_path: Path) -> None:
    here = Heartbeat(tmp_path / "mine", interval=0.1)
    try:
        assert orchestrator_status(tmp_path / "mine") is not None
        assert orchestrator_status(tmp_path / "mine").alive  # type: ignore[union-attr]
        before = (tmp_path / "mine" / HEARTBEAT_FILE).stat().st_mtime
        time.sleep(0.5)
        assert (tmp_path / "mine" / HEARTBEAT_FILE).stat().st_mtime > before  # it keeps beating
    finally:
        here.stop()
    # another host: by the age of its last beat
    path = _beat(tmp_path / "remote")
    now = path.stat().st_mtime
    assert orchestrator_status(tmp_path / "remote", now=now + 10).alive  # type: ignore[union-attr]
    lost = orchestrator_status(tmp_path / "remote", now=now + 60)
    assert lost is not None and not lost.alive and lost.lost_at == pytest.approx(now)
    # this host: by its pid and that pid's start time (a pid reused by another process is not it)
    import socket

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _beat(tmp_path / "dead", host=socket.gethostname(), pid=int(gone.stdout), pid_start=1)
    assert not orchestrator_status(tmp_path / "dead").alive  # type: ignore[union-attr]
    _beat(tmp_path / "reused", host=socket.gethostname(), pid=os.getpid(), pid_start=-1)
    assert not orchestrator_status(tmp_path / "reused").alive  # type: ignore[union-attr]
    # nothing known without a heartbeat
    assert orchestrator_status(tmp_path / "nothing") is None


def test_a_loss_the_grader_recorded_wins_over_everything(tmp_path: Path) -> None:
    from autorl.grader.store import Store

    store_dir = tmp_path / "store"
    Heartbeat(store_dir, interval=60).stop()  # our own pid: alive, were it not for the grader's record
    store = Store(store_dir / "grader.db")
    store.set_meta(LOST_AT_KEY, 1234.5)
    store.close()
    status = orchestrator_status(store_dir)
    assert status is not None and not status.alive and status.lost_at == 1234.5


def test_runs_in_flight_are_live_or_lost_with_the_command_to_recover(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "autorl.db")
    now = time.time()
    Heartbeat(tmp_path / "live-store", interval=60).stop()
    _beat(tmp_path / "lost-store")
    os.utime(tmp_path / "lost-store" / HEARTBEAT_FILE, (now - 120, now - 120))
    base = {"task": "echo", "agent": "a", "base_model": "m", "timeout_s": 60, "started": now - 200}
    ledger.start_run({"run_id": "live", "store_dir": str(tmp_path / "live-store"), **base})
    ledger.start_run({"run_id": "lost", "store_dir": str(tmp_path / "lost-store"), **base})
    # no heartbeat (a store gone, or a run from before heartbeats): live until well past its deadline
    ledger.start_run({"run_id": "old", "store_dir": str(tmp_path / "gone"), **base, "deadline": now - 4 * 3600})
    ledger.start_run({"run_id": "recent", "store_dir": str(tmp_path / "gone"), **base, "deadline": now + 60})
    try:
        status = {r["run_id"]: r for r in in_flight(ledger, now)}
        assert {k: v["status"] for k, v in status.items()} == {
            "live": "running",
            "lost": "lost",
            "old": "lost",
            "recent": "running",
        }
        assert status["lost"]["recover"] == "autorl recover lost" and "recover" not in status["live"]
        assert sorted(r["run_id"] for r in lost_runs(ledger, now)) == ["lost", "old"]
        assert run_status(status["old"], now).detail.startswith("no grader store")
    finally:
        ledger.close()


def test_a_lost_run_whose_store_is_gone_is_recorded_with_what_is_known(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ledger = Ledger(home / "autorl.db")
    ws = tmp_path / "runs" / "echo" / "r1_a"
    ledger.start_run(
        {
            "run_id": "r1",
            "task": "echo",
            "agent": "a",
            "base_model": "m",
            "workspace": str(ws),
            "store_dir": str(tmp_path / "gone"),
            "started": time.time() - 5 * 3600,
            "timeout_s": 60,
            "deadline": time.time() - 4 * 3600,
            "seed": 3,
            "sandbox": "bwrap",
        }
    )
    ledger.close()
    with pytest.raises(Exception, match="no run nope"):
        recover("nope", home=home, log=lambda _: None)
    done = recover("r1", home=home, log=lambda _: None)
    assert done.action == "recorded"
    row = done.row
    assert row["end_reason"].startswith(f"{LOST_REASON} at ") and "the grader store is gone" in row["end_reason"]
    assert row["submissions"] == 0 and row["success"] is False and row["seed"] == 3 and row["sandbox"] == "bwrap"
    assert json.loads((ws / "result.json").read_text())["row"]["run_id"] == "r1"
    assert recover("r1", home=home, log=lambda _: None).action == "already recorded"
    ledger = Ledger(home / "autorl.db")
    try:
        assert ledger.live() == [] and [r["run_id"] for r in ledger.rows()] == ["r1"]
    finally:
        ledger.close()


def test_a_lost_run_keeps_the_llm_usage_its_gateway_left_and_no_link_stands_for_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    totals = {
        "calls": 3,
        "failed": 0,
        "refused": 1,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "cached_tokens": 0,
        "tokens": 120,
        "cost_usd": 0.5,
        "closed": True,
    }
    (tmp_path / "gw-r1").mkdir()
    (tmp_path / "gw-r1" / "summary.json").write_text(json.dumps(totals))
    (tmp_path / "gw-r2").mkdir()
    (tmp_path / "gw-r2" / "summary.json").symlink_to(tmp_path / "gw-r1" / "summary.json")
    ledger = Ledger(home / "autorl.db")
    for run_id in ("r1", "r2"):
        ledger.start_run(
            {
                "run_id": run_id,
                "task": "echo",
                "agent": "a",
                "base_model": "m",
                "workspace": str(tmp_path / "runs" / run_id),
                "store_dir": str(tmp_path / "gone"),
                "started": time.time() - 5 * 3600,
                "timeout_s": 60,
                "deadline": time.time() - 4 * 3600,
                "gateway_dir": str(tmp_path / f"gw-{run_id}"),
            }
        )
    ledger.close()
    kept = recover("r1", home=home, log=lambda _: None).row
    assert kept["llm_tokens"] == 120 and kept["llm_cost_usd"] == 0.5 and kept["llm_usage_source"] == "gateway"
    meta = json.loads((tmp_path / "runs" / "r1" / "result.json").read_text())["meta"]
    assert meta["llm_usage"]["calls"] == 3 and meta["orchestrator"]["how"] == "the grader store is gone"
    linked = recover("r2", home=home, log=lambda _: None).row
    assert linked["llm_tokens"] is None and linked["llm_usage_source"] is None
    meta = json.loads((tmp_path / "runs" / "r2" / "result.json").read_text())["meta"]
    assert "llm_usage" not in meta and "no totals" in meta["llm_gateway"]["error"]


def test_a_live_run_is_not_recovered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Heartbeat(tmp_path / "store", interval=60).stop()
    ledger = Ledger(home / "autorl.db")
    ledger.start_run(
        {
            "run_id": "r1",
            "task": "echo",
            "agent": "a",
            "base_model": "m",
            "store_dir": str(tmp_path / "store"),
            "started": time.time(),
            "timeout_s": 60,
        }
    )
    ledger.close()
    with pytest.raises(Exception, match="still live"):
        recover("r1", home=home, log=lambda _: None)


def test_a_lease_breaks_when_its_holder_dies_or_releases_it() -> None:
    # the child's side: EOF once the holder of the write end is gone, however it went
    read, write = os.pipe()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(write,))
    os.close(write)
    broke: list[float] = []
    watch_lease(read, lambda: broke.append(time.time()))
    time.sleep(0.3)
    assert not broke
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    end = time.time() + 5
    while not broke and time.time() < end:
        time.sleep(0.05)
    assert broke
    # the orchestrator's side: the child holds its end; release() is the end of the lease
    lease = Lease()
    child = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; os.read(int(sys.argv[1]), 1)", str(lease.child_fd)],
        pass_fds=(lease.child_fd,),
    )
    lease.handed_over()
    time.sleep(0.3)
    assert child.poll() is None
    lease.release()
    lease.release()  # twice is harmless (no number is closed twice)
    assert child.wait(timeout=5) == 0


def test_the_guard_ends_its_command_and_the_command_s_children_when_its_parent_dies(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; from autorl.procs.lease import guarded; "
            "subprocess.Popen(guarded(sys.argv[1:]), start_new_session=True); time.sleep(300)",
            "bash",
            "-c",
            script,
        ]
    )
    try:
        end = time.time() + 20
        while (not pids.exists() or len(pids.read_text().split()) < 3) and time.time() < end:
            time.sleep(0.1)
        started = [int(p) for p in pids.read_text().split()]
        assert all(_alive(p) for p in started)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        end = time.time() + 5
        while any(_alive(p) for p in started) and time.time() < end:
            time.sleep(0.1)
        assert not any(_alive(p) for p in started)
    finally:
        parent.kill()


def test_a_busy_child_ends_with_its_parent(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    child = (
        "import os, sys, time; from autorl.procs.lease import end_with_parent; end_with_parent(0.1); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True); "
            "time.sleep(300)",
            child,
        ]
    )
    try:
        end = time.time() + 20
        while not pid_file.exists() and time.time() < end:
            time.sleep(0.05)
        time.sleep(0.1)
        pid = int(pid_file.read_text())
        assert _alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        end = time.time() + 5
        while _alive(pid) and time.time() < end:
            time.sleep(0.05)
        assert not _alive(pid)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "zombie" not in status.lower()


def test_a_grader_killed_mid_evaluation_takes_its_worker_with_it(tmp_path: Path) -> None:
    from tests.conftest import echo_answers, write_stub_checkpoint
    from tests.grader_harness import make_config, start_grader

    g = start_grader(make_config(tmp_path))
    try:
        write_stub_checkpoint(g.output / "slow", echo_answers(3), {"sleep": 60})
        with g.client() as c:
            c.post("/submit", params={"wait": "false"}, json={"model_path": "output/slow"}).raise_for_status()
        end = time.time() + 30
        workers: list[int] = []
        while not workers and time.time() < end:
            workers = [
                int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _child_worker(p, g.proc.pid)
            ]
            time.sleep(0.1)
        assert workers
        g.kill()  # the grader's own group: the worker leads a session of its own
        end = time.time() + 5
        while any(_alive(w) for w in workers) and time.time() < end:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers)
    finally:
        if g.proc.poll() is None:
            g.stop()


def test_a_test_evaluation_a_stopped_grader_abandoned_is_scored_by_the_next_once(tmp_path: Path) -> None:
    from autorl.grader.store import Store
    from tests.conftest import echo_answers, write_stub_checkpoint
    from tests.grader_harness import make_config, start_grader, wait_done

    base = write_stub_checkpoint(tmp_path / "base", {**echo_answers(5), **echo_answers(6, "test")})
    config = make_config(tmp_path, base_model=str(base))
    g = start_grader(config)
    try:
        write_stub_checkpoint(g.output / "v1", {**echo_answers(8), **echo_answers(9, "test")})
        with g.client() as c:
            assert (
                wait_done(c, c.post("/submit", json={"model_path": "output/v1"}).json()["submission_id"])["status"]
                == "done"
            )
    finally:
        g.stop()
    store = Store(Path(config.store_dir) / "grader.db")
    assert store.claim_test(1)  # as a grader that lost its orchestrator mid-evaluation leaves it
    store.close()
    g = start_grader(config)
    try:
        with g.admin_http() as admin:
            test = admin.post("/admin/test", json={}).json()
            assert test["status"] == "done" and test["score"] == pytest.approx(30.0)
            assert admin.post("/admin/test", json={}).json() == test  # once
    finally:
        g.stop()


def _child_worker(proc: Path, parent: int) -> bool:
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    return int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"autorl.grader.worker" in cmdline
