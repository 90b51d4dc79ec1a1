"""Step 3 of a run: its id and the places it lives in: ``<runs>/<task>/<run_id>_<agent>/`` (the workspace, built
by :func:`autorl.runs.workspace.build_workspace`), the grader's store and the agent's private folders beside it, out
of the agent's reach, and the grader's port."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.audit import harness_hashes
from autorl.errors import AutorlError, UsageError
from autorl.procs.group import free_port
from autorl.resources import private_dir
from autorl.runs.workspace import Workspace, build_workspace

if TYPE_CHECKING:
    from autorl.runs.plan import Assets, Plan
    from autorl.runs.progress import Say
    from autorl.runs.spec import RunSpec

__all__ = ["Place", "check_port", "make_place", "new_run_id", "runs_root_of"]


@dataclass(frozen=True)
class Place:
    """Where the run lives: its workspace, the grader's store and the agent's private folders, the port."""

    run_id: str
    root: Path
    workspace: Workspace
    runs_root: Path
    store_dir: Path
    tmp_dir: Path
    watch_dir: Path
    gateway_dir: Path
    port: int
    harness: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def check_port(port: int | None) -> None:
    """A ``--port`` that is out of range or taken is refused before anything starts, with the cause."""
    import socket

    if port is None:
        return
    if not 0 < port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise UsageError(
                f"--port {port} cannot be used on 127.0.0.1 ({exc.strerror or exc}): another process "
                "holds it; choose another port or leave --port out"
            ) from None


def make_place(plan: Plan, assets: Assets, home: Path, spec: RunSpec, say: Say, disk: str = "") -> Place:
    """``<runs>/<task>/<run_id>_<agent>/`` built (under the spec's ``runs_dir``), the grader's store and the
    agent's folders made private, the grader's port chosen (the spec's, else a free one)."""
    model, data, timeout = assets.model, assets.data, spec.timeout
    runs_root = runs_root_of(spec.runs_dir, home)
    run_id, root = new_run_id(runs_root / plan.task, plan.agent_name, home)
    name = f"{plan.task}_{run_id}_{plan.agent_name}"
    store_dir = private_dir(home / "grader" / name)
    # the agent's /tmp and the record of the files it had, beside the grader's store: outside the workspace,
    # out of the agent's reach, and readable by the audit after the run
    agent_dir = private_dir(home / "grader" / f"{name}.agent")
    port = spec.port or free_port()
    ws = build_workspace(
        root,
        benchmark=plan.benchmark,
        model=model,
        train_dir=data.train_dir,
        timeout_s=timeout,
        grader_url=f"http://127.0.0.1:{port}",
        disk=disk,
    )
    say(f"run {run_id}: {plan.agent_name} on {plan.task} from {model.spec} ({timeout:.0f} s); workspace {root}")
    return Place(
        run_id=run_id,
        root=root,
        workspace=ws,
        runs_root=runs_root,
        store_dir=store_dir,
        tmp_dir=private_dir(agent_dir / "tmp"),
        watch_dir=private_dir(agent_dir / "watch"),
        gateway_dir=home / "gateway" / name,
        port=port,
        harness=harness_hashes(root, plan.benchmark),
    )


def runs_root_of(runs_dir: Path | str | None, home: Path) -> Path:
    """Where a run's workspace goes: ``runs_dir`` (``--runs-dir``), else ``AUTORL_HOME/runs``."""
    return Path(runs_dir).expanduser() if runs_dir else home / "runs"


def new_run_id(parent: Path, agent: str, home: Path) -> tuple[str, Path]:
    """A run id unique in this home (the ledger's key, the grader store's name) and a workspace directory,
    both claimed atomically: runs started in the same second (a study's slots) each get their own."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    claims = private_dir(home / "grader" / ".run-ids")
    for k in range(1000):
        run_id = stamp if k == 0 else f"{stamp}-{k}"
        root = parent / f"{run_id}_{agent}"
        if root.exists():
            continue
        try:
            (claims / run_id).mkdir()
        except FileExistsError:
            continue
        try:
            root.mkdir(parents=True)
        except FileExistsError:
            continue
        return run_id, root
    raise AutorlError(f"cannot find a free run directory under {parent}")
