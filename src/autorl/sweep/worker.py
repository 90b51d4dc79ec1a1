"""One attempt on a compute node: ``autorl run`` as its own process, its files copied into the sweep directory.

The run's ``AUTORL_HOME`` is a scratch home on the node's local disk (``AUTORL_SWEEP_SCRATCH``, else the
temporary directory): its ledger, grader stores and LLM gateway records live there, so no SQLite file is opened
on a network filesystem. The run's workspace, which its record names, is kept with the study's records, in the
attempt's folder (``<sweep>/keys/<run_key>/a<N>/runs/``, under ``AUTORL_HOME/sweeps`` or where the spec says).
The run's sandbox masks the shared home, the study folder and the whole scratch root and binds the workspace
back alone, so the agent sees its own workspace and nothing else of either. The shared home's ``models/`` and
``datasets/`` are linked into the scratch home (a model is downloaded or built once) and the task's hidden folder
is copied from it (the same items, drawn with the same secret, on every node). Its ``baselines/`` is linked too:
a base model's score on the same hidden items is computed once and read by every later run, study or plain
``autorl run`` with that home (the cache key covers the items, the evaluation settings and the model's bytes), so
the engine warm-up, not a baseline, is what a later run's grader spends its first seconds on. At the end the result, read from
the scratch ledger (never from a file the agent can write), and the grader's store are copied into the attempt's
folder.

An attempt ends in one of two ways: a *result* (``autorl run`` recorded the run, whatever the agent did) or an
*infrastructure failure* (``autorl run`` did not finish: killed, preempted, out of disk, a crash; or it recorded
a run that the harness could not measure, its ``infra_failure`` set: every evaluation failed for the machine's
reason, never the checkpoint's), which the coordinator may retry.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from autorl.record.schema import ResultRecord
from autorl.sweep.keys import environ_devices, gpu_flag
from autorl.sweep.records import Outcome, Payload
from autorl.sweep.store import INFRA, RESULT, read_json, write_json

#: the program that runs one cell (tests and benchmarks put a fake run here; see docs/sweep.md)
RUN_PROGRAM_ENV = "AUTORL_SWEEP_RUN_PROGRAM"
SCRATCH_ENV = "AUTORL_SWEEP_SCRATCH"
#: MiB held back on the scratch disk and on the study's disk while a run goes, freed once it ends so that its
#: record can be written even when its agent filled either
RESERVE_ENV = "AUTORL_SWEEP_RESERVE_MB"
DEFAULT_RESERVE_MB = 64
#: seconds a run gets to clean up after SIGINT before it is killed
STOP_GRACE_S = 20.0


class _NoRoom(Exception):
    """Too little disk to start the run now (the message says how much, where)."""


def scratch_home(payload: Payload) -> Path:
    """The node-local home of this sweep's runs (shared by the attempts that run on this node)."""
    root = Path(payload.get("scratch") or os.environ.get(SCRATCH_ENV) or tempfile.gettempdir())
    home = root / f"autorl-sweep-{os.getuid()}" / f"{payload['sweep']}-{payload['sweep_id']}" / "home"
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home.parent.parent, 0o700)
    return home


def run_id(payload: Payload) -> str:
    """The attempt's run id, ``<run_key>-<sweep_id>-a<N>``: unique to one execution, so two studies whose cells
    coincide (same agent, task, model and seed under another name or folder) never share a record or a folder."""
    return f"{payload['run_key']}-{payload['sweep_id']}-a{payload['attempt']}"


def read_payload(path: Path) -> Payload:
    """An attempt's ``payload.json`` (written by the coordinator, completed by the executor)."""
    payload = read_json(path)
    if not isinstance(payload, dict) or not all(
        k in payload for k in ("run_key", "attempt", "sweep", "sweep_id", "args", "options", "home", "sweep_dir")
    ):
        raise RuntimeError(f"{path.parent} has no payload.json")
    return cast(Payload, payload)


def _link_shared(home: Path, shared: Path, task: str) -> None:
    from autorl.resources import file_lock, private_dir

    for name in ("models", "datasets", "baselines"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        link = home / name
        if not link.is_symlink() and not link.exists():
            with contextlib.suppress(FileExistsError):  # another attempt on this node made it
                link.symlink_to(shared / name, target_is_directory=True)
    source = shared / "hidden" / task
    target = private_dir(home / "hidden") / task
    if source.is_dir():
        with file_lock(home / "hidden" / f".{task}.lock"):
            if not (target / "secret").exists():
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(source, target, symlinks=True)
                os.chmod(target, 0o700)


def _reserve(path: Path) -> None:
    """A file of ``AUTORL_SWEEP_RESERVE_MB`` MiB (default 64) at ``path``, its blocks allocated; an ``OSError``
    (no room for it) fails the attempt before its run starts."""
    raw = os.environ.get(RESERVE_ENV, str(DEFAULT_RESERVE_MB))
    try:
        size = int(float(raw) * 2**20)
    except ValueError:
        raise OSError(f"{RESERVE_ENV} must be a number of MiB, not {raw!r}") from None
    if size <= 0:
        return
    _RESERVES.append(path)
    with path.open("wb") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here: write zeros
                raise
            block = bytes(2**20)
            for start in range(0, size, len(block)):
                f.write(block[: size - start])
            f.flush()
            os.fsync(f.fileno())


def _recover(payload: Payload, home: Path, runs_dir: Path, env: dict[str, str], log: Path) -> None:
    """Record, from its grader's store, a run of this attempt that ended without its record (its agent filled
    the disk, say): ``autorl recover`` with the room the reserve gave back. A run whose scored submissions are
    in its store is then a result, never an infrastructure failure retried for another chance."""
    from autorl.record.ledger import Ledger

    if payload.get("program") or not (home / "autorl.db").is_file():
        return
    ledger = Ledger(home / "autorl.db")
    try:
        lost = [
            str(r["run_id"]) for r in ledger.live() if Path(str(r.get("workspace") or "/")).is_relative_to(runs_dir)
        ]
    finally:
        ledger.close()
    for run_id in lost:
        with log.open("ab") as err:
            subprocess.run(
                [sys.executable, "-c", "from autorl.cli import main; main()", "recover", run_id],
                stdout=err,
                stderr=err,
                env=env,
                stdin=subprocess.DEVNULL,
                check=False,
            )


def _command(payload: Payload, runs_dir: Path) -> list[str]:
    program = payload.get("program") or [sys.executable, "-c", "from autorl.cli import main; main()"]
    args = ["run", *payload["args"], "--runs-dir", str(runs_dir), "--json"]
    given = payload.get("gpus")
    devices = given if given is not None else environ_devices()
    flag = gpu_flag(payload["options"], [str(d) for d in devices]) if payload["options"]["gpus"] else None
    if flag:
        args += ["--gpus", flag]
    return [*program, *args]


def _tail(path: Path, lines: int = 1) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])[:300]


def _copy_store(result: ResultRecord, attempt_dir: Path) -> None:
    """The grader's store and the watch's record, copied into the attempt's folder; a copy that fails (the study's
    disk full) leaves the node's path in the record and says why: the result is recorded all the same."""
    meta = result.setdefault("meta", {})
    for key, name in (("store_dir", "grader"), ("watch_dir", "watch")):
        src = meta.get(key)
        if src and Path(src).is_dir():
            dst = attempt_dir / name
            shutil.rmtree(dst, ignore_errors=True)
            try:
                shutil.copytree(src, dst, symlinks=True)
            except (OSError, shutil.Error) as exc:
                shutil.rmtree(dst, ignore_errors=True)
                meta[f"{key}_not_copied"] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            meta[f"node_{key}"], meta[key] = src, str(dst)
            shutil.rmtree(src, ignore_errors=True)  # the copy is the record's: the scratch disk gets its space back


def _result(home: Path, stdout: str) -> ResultRecord:
    import json

    from autorl.record.ledger import Ledger

    row = json.loads(stdout)
    ledger = Ledger(home / "autorl.db")
    try:
        result = ledger.run(str(row["run_id"]))
    finally:
        ledger.close()
    return result if result is not None else {"row": row, "submissions": [], "meta": {"recorded_from": "stdout"}}


def _recorded(home: Path, runs_dir: Path) -> ResultRecord | None:
    """The run this attempt's ``autorl run`` recorded in its ledger, if it got that far (whatever its exit):
    a recorded run is a result, never an infrastructure failure to retry (that would be best-of-n)."""
    from autorl.record.ledger import Ledger

    if not (home / "autorl.db").is_file():
        return None
    ledger = Ledger(home / "autorl.db")
    try:
        found = [
            r for r in ledger.runs() if Path(str((r.get("row") or {}).get("workspace") or "/")).is_relative_to(runs_dir)
        ]
    finally:
        ledger.close()
    return found[-1] if found else None


def run_attempt(attempt_dir: str | Path) -> Outcome:
    """Run the attempt in ``attempt_dir`` (its ``payload.json``); returns and writes its ``outcome.json``."""
    attempt_dir = Path(attempt_dir)
    payload = read_payload(attempt_dir / "payload.json")
    started = time.time()
    write_json(
        attempt_dir / "node.json",
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started": started,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },
    )
    outcome: Outcome
    try:
        home = scratch_home(payload)
        _link_shared(home, Path(payload["home"]), payload["options"]["task"])
        # the workspace stays with the study's record of the attempt; the sandbox binds it back alone
        runs_dir = attempt_dir / "runs"
        # nothing of the engine reaches the run: no RAY_ADDRESS, no session directory named
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "AUTORL_FILE_PATH"}
        env["AUTORL_HOME"] = str(home)
        # the run's agent must not see the shared home (every task's hidden items and secret, the ledger), the
        # study folder (other runs' workspaces, results and grader stores) nor any study's scratch home under this
        # scratch root (other studies' hidden items, secrets, ledgers and grader stores), whatever disk it is on:
        # the run's sandbox masks them all and binds back only the run's own workspace, model and data
        hide = [
            str(Path(payload["home"])),
            str(Path(payload["sweep_dir"])),
            str(home.parent.parent),
            os.environ.get("AUTORL_SANDBOX_HIDE", ""),
        ]
        env["AUTORL_SANDBOX_HIDE"] = os.pathsep.join(p for p in hide if p)
        gpus, need = payload.get("gpus"), payload.get("disk_need")
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in gpus)
        log = attempt_dir / "run.log"
        if need:
            from autorl.sweep.disk import room_for_run

            short = room_for_run([home, attempt_dir], int(need))
            if short is not None:
                raise _NoRoom(short)
        try:
            _reserve(home.parent / f".reserve-{run_id(payload)}")
            _reserve(attempt_dir / ".reserve")
            with log.open("ab") as err:
                proc = subprocess.Popen(
                    _command(payload, runs_dir), stdout=subprocess.PIPE, stderr=err, env=env, stdin=subprocess.DEVNULL
                )
                _CHILD[0] = proc
                out, _ = proc.communicate()
        finally:
            _release()
        code = proc.returncode
        recorded = None if code == 0 else _recorded(home, runs_dir)
        if code != 0 and recorded is None:
            _recover(payload, home, runs_dir, env, log)
            recorded = _recorded(home, runs_dir)
        if code == 0 or recorded is not None:
            result = _result(home, out.decode()) if recorded is None else recorded
            if code != 0:
                result.setdefault("meta", {})["exit_after_record"] = f"autorl run exited with code {code}: {_tail(log)}"
            _copy_store(result, attempt_dir)
            row = result["row"]
            result["meta"]["runner_run_id"] = row["run_id"]
            row["run_id"], row["run_key"], row["sweep"] = run_id(payload), payload["run_key"], payload["sweep"]
            result["meta"]["sweep"] = {
                "name": payload["sweep"],
                "dir": payload["sweep_dir"],
                "run_key": payload["run_key"],
                "attempt": payload["attempt"],
            }
            write_json(attempt_dir / "result.json", result)
            outcome = {
                "kind": RESULT,
                "reason": str(row.get("end_reason") or ""),
                "success": bool(row.get("success")),
                "improvement": row.get("improvement"),
            }
            if row.get("infra_failure"):  # recorded, but not measured, and not for the agent's doing: retried
                outcome = {
                    "kind": INFRA,
                    "reason": str(row.get("end_reason") or row["infra_failure"])[:300],
                    "recorded": True,
                }
        elif code < 0:
            outcome = {"kind": INFRA, "reason": f"autorl run killed by {signal.Signals(-code).name}"}
        else:
            outcome = {"kind": INFRA, "reason": f"autorl run exited with code {code}: {_tail(log) or 'no output'}"}
    except _NoRoom as exc:
        outcome = {"kind": INFRA, "reason": str(exc)[:300]}
    except OSError as exc:  # out of disk, a vanished mount: the node's fault, not the agent's
        outcome = {"kind": INFRA, "reason": f"{type(exc).__name__}: {exc}"[:300]}
    outcome.update(
        {"finished": time.time(), "duration_s": round(time.time() - started, 1), "host": socket.gethostname()}
    )
    if not (attempt_dir / "outcome.json").exists():
        write_json(attempt_dir / "outcome.json", outcome)
    return outcome


_CHILD: list[subprocess.Popen[bytes] | None] = [None]
#: the reserve files made by this worker, removed when it is stopped
_RESERVES: list[Path] = []


def _release() -> None:
    while _RESERVES:
        with contextlib.suppress(OSError):
            _RESERVES.pop().unlink(missing_ok=True)


def _on_signal(signum: int, frame: Any) -> None:
    """Stop the run (SIGINT lets it stop its grader and agent), record why, and exit."""
    child = _CHILD[0]
    if child is not None and child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
    _release()
    attempt_dir = Path(sys.argv[1])
    if not (attempt_dir / "outcome.json").exists():
        write_json(
            attempt_dir / "outcome.json",
            {"kind": INFRA, "finished": time.time(), "reason": f"worker stopped by {signal.Signals(signum).name}"},
        )
    os._exit(143)


def main() -> None:
    """``python -m autorl.sweep.worker ATTEMPT_DIR`` (the local executor starts one per run)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    run_attempt(sys.argv[1])


if __name__ == "__main__":
    main()
