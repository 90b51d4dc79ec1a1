"""A single-node Slurm cluster for tests: munged, slurmctld and slurmd of the distribution's slurm-wlm and munge
packages, on this host, each with its own files under one folder (its slurm.conf, munge key and socket, spool,
state and logs) and its own ports, so that nothing of a system-wide Slurm is used or touched.

``single_node_slurm(folder)`` starts them, waits until ``sinfo`` shows the node idle, yields the environment
that points Slurm's commands at this cluster (``SLURM_CONF``) and stops them afterwards. ``missing()`` says why
no cluster can be started here (None when one can).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NODE = "autorl-node"
PARTITION = "autorl"
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "sacct", "sinfo", "scancel", "squeue")
START_S = 60.0


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None
    )


def missing() -> str | None:
    """Why a single-node cluster cannot be started here, or None."""
    absent = [name for name in (*DAEMONS, *COMMANDS) if _binary(name) is None]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): apt-get install slurm-wlm munge"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs: run the cluster tests as root"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024 - 512  # slurmd refuses a node that reports less than configured
    return 1024


def write_conf(folder: Path, munge_socket: Path) -> Path:
    """A minimal slurm.conf: one node (this host's CPUs and memory) in one partition, no accounting database
    (``sacct`` reads the job completion file instead)."""
    ctld_port, slurmd_port = _free_ports(2)
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    cpus = os.cpu_count() or 1
    conf = folder / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=autorl-test",
                "SlurmctldHost=localhost(127.0.0.1)",
                f"SlurmctldPort={ctld_port}",
                f"SlurmdPort={slurmd_port}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={munge_socket}",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.pid'}",
                f"SlurmctldLogFile={folder / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SchedulerType=sched/builtin",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=2",
                "MpiDefault=none",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "JobCompType=jobcomp/filetxt",
                f"JobCompLoc={folder / 'jobcomp.txt'}",
                "KillWait=5",
                "MinJobAge=300",
                "SlurmctldTimeout=30",
                "SlurmdTimeout=30",
                f"NodeName={NODE} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={_memory_mb()} "
                "State=UNKNOWN",
                f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    return conf


def _start_munge(folder: Path) -> tuple[Path, Path]:
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = folder / "munge" / "munge.socket"
    sock.parent.mkdir(mode=0o755, exist_ok=True)
    pid = folder / "munged.pid"
    subprocess.run(
        [
            str(_binary("munged")),
            "--force",
            f"--socket={sock}",
            f"--key-file={key}",
            f"--pid-file={pid}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return sock, pid


def _stop(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def _node_state(env: dict[str, str]) -> str:
    proc = subprocess.run(
        ["sinfo", "-h", "-N", "-n", NODE, "-o", "%T"], capture_output=True, text=True, env=env, timeout=30
    )
    return proc.stdout.strip()


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(folder.glob("*.log")))


@contextmanager
def single_node_slurm(folder: Path) -> Iterator[dict[str, str]]:
    """Start a single-node cluster in ``folder``; yields the environment for its commands."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    pid_files = [folder / "slurmd.pid", folder / "slurmctld.pid"]
    munge_pid = folder / "munged.pid"
    try:
        sock, munge_pid = _start_munge(folder)
        conf = write_conf(folder, sock)
        env = {**os.environ, "SLURM_CONF": str(conf)}
        subprocess.run(
            [str(_binary("slurmctld")), "-f", str(conf)], check=True, capture_output=True, env=env, timeout=30
        )
        subprocess.run(
            [str(_binary("slurmd")), "-f", str(conf), "-N", NODE], check=True, capture_output=True, env=env, timeout=30
        )
        deadline = time.time() + START_S
        state = ""
        while time.time() < deadline:
            state = _node_state(env)
            if state == "idle":
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the Slurm node never became idle (last state {state!r})\n{_logs(folder)}")
        yield {"SLURM_CONF": str(conf)}
    finally:
        for pid_file in (*pid_files, munge_pid):
            _stop(pid_file)
