"""Step 6 of a run: the agent in its own process group (under bubblewrap where chosen) until it exits or its
deadline passes, its files watched and each submission's dev score printed as it lands."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.agent import AgentContext
from autorl.audit.watch import Watcher, interval_from_env
from autorl.decoys import DecoyWatch, Planted, WatchedRecord
from autorl.grader.capability import capability_url
from autorl.jsonio import write_json_atomic
from autorl.procs.agent import AgentOutcome, run_agent
from autorl.procs.lease import guarded
from autorl.record.metrics import configured_model
from autorl.runs.finish import outcome_record
from autorl.runs.progress import SubmissionPrinter

if TYPE_CHECKING:
    from autorl.record.schema import OutcomeRecord
    from autorl.runs.place import Place
    from autorl.runs.plan import Assets, Plan
    from autorl.runs.progress import Say
    from autorl.runs.services import Services
    from autorl.runs.spec import RunSpec
    from autorl.sandbox import Policy, SandboxChoice

__all__ = ["POLICY_RECORD", "AgentRun", "check_agent_view", "run_the_agent"]

#: the agent's policy as the run records it, in the agent's private folder beside its /tmp
POLICY_RECORD = "policy.json"


@dataclass(frozen=True)
class AgentRun:
    """How the agent's process ended (:class:`~autorl.procs.agent.AgentOutcome` as a dict), and what the
    watcher of its files saw."""

    outcome: OutcomeRecord
    watch: dict[str, int]
    #: the decoys read while the agent ran (``opened``) and how that was watched (``method``)
    decoys: WatchedRecord | None = None
    #: the model the agent's environment names (its configuration's and the operator's variables), if any
    configured_model: str | None = None


def _import_path() -> dict[str, str]:
    """``PYTHONPATH`` for the agent's Python (``AUTORL_PYTHON``), so that it imports autorl however this process
    did: this process's ``PYTHONPATH``, and the folder autorl was imported from when it is not the interpreter's
    own installation (a site folder, a checkout)."""
    from autorl.sandbox.host import import_root

    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    root = str(import_root())
    prefixes = {str(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)}
    if not any(root.startswith(p + os.sep) for p in prefixes) and root not in entries:
        entries.append(root)
    return {"PYTHONPATH": os.pathsep.join(entries)} if entries else {}


def _context(plan: Plan, assets: Assets, place: Place, services: Services, deadline: float, seed: int) -> AgentContext:
    """The agent's run context; :class:`AgentContext` builds the environment contract from it."""
    model = assets.model
    ws = place.workspace
    return AgentContext(
        task=plan.task,
        base_model=model.name,
        workspace=place.root,
        model_path=ws.model(model.name),
        data_path=ws.data,
        output_dir=ws.output,
        token=services.config.agent_token,
        # the token in the URL too: an agent written for the reference harness submits without a header
        grader_url=capability_url(place.url, services.config.agent_token),
        deadline=deadline,
        run_dir=place.root,
        env={"AUTORL_SEED": str(seed), "AUTORL_PYTHON": sys.executable, **_import_path(), **plan.gpus.agent_env()},
    )


def check_agent_view(
    plan: Plan, assets: Assets, home: Path, runs_dir: Path | str | None, given: Mapping[str, str]
) -> None:
    """What the benchmark and the agent ask the sandbox to show the agent, checked before anything starts: a
    one-line :class:`~autorl.errors.UsageError` naming the plugin and the variable or file that holds a hidden
    item or a key, or shows what every agent's policy masks (:mod:`autorl.sandbox.offered`). ``given`` is what
    the operator passes the agent on purpose."""
    from autorl.plugins.registry import registrations
    from autorl.runs.place import runs_root_of
    from autorl.sandbox.agent import agent_masks, refuse_uncovering
    from autorl.sandbox.offered import check_offered

    runs_root = runs_root_of(runs_dir, home)
    masked = agent_masks(home, runs_root)
    registered = registrations("benchmark").get(plan.task)
    plugin = f"plugin {registered.distribution}" if registered else "a plugin"
    check_offered(plan.benchmark, Path(assets.data.hidden_dir), plugin=plugin, masked=masked, given=given)
    refuse_uncovering(f"agent {plan.agent_name}: sandbox_paths()", plan.agent.sandbox_paths(), masked)


def run_the_agent(
    plan: Plan,
    assets: Assets,
    place: Place,
    services: Services,
    stack: contextlib.ExitStack,
    home: Path,
    deadline: float,
    spec: RunSpec,
    say: Say,
    decoys: Planted | None = None,
) -> AgentRun:
    """The agent in its process group (sandboxed where chosen) until it exits or the deadline passes (then, after
    the spec's ``grace_s``, it is killed); the ``decoys`` planted in its workspace watched meanwhile (the watcher
    of its files leaves them unread)."""
    from autorl.sandbox import launch
    from autorl.sandbox.agent import agent_env

    ctx = _context(plan, assets, place, services, deadline, spec.seed)
    gateway = services.gateway
    # the agent reaches models only through the gateway: no upstream key, the run's token instead; the
    # benchmark's variables under the harness's, and scrubbed like the rest
    env = agent_env(
        ctx.env,
        plan.agent.environment(ctx),
        benchmark=plan.benchmark.agent_env(),
        gateway_url=gateway.url,
        token=gateway.config.token,
    )
    bwrap = plan.sandbox.mode == "bwrap"
    policy = _policy(plan, assets, place, stack, home=home, env=env, relay_ports=[int(gateway.url.rsplit(":", 1)[1])])
    # what the agent was shown, recorded beside its /tmp (out of its reach): the selftest judges by it
    write_json_atomic(place.tmp_dir.parent / POLICY_RECORD, policy.record())
    run = launch(policy, plan.agent.command(ctx), mode=plan.sandbox.mode, executable=plan.sandbox.executable)
    argv = guarded(run.argv)  # the agent (and its sandbox) ends with this process, however this process ends
    log_path = place.workspace.agent_log
    say(f"agent {plan.agent_name} started ({_describe(plan.sandbox)}); log {log_path}")
    sources = [("", place.root)] + ([("/tmp/", place.tmp_dir)] if bwrap else [])
    planted = decoys or Planted()
    watcher = Watcher(sources, place.watch_dir, interval_from_env(), seen=_states(place.root, planted)).start()
    decoy_watch = DecoyWatch(place.root, planted).start() if decoys is not None else None
    # each submission's dev score as it lands, read from the grader (whichever process serves it now)
    printer = SubmissionPrinter(lambda: services.grader.admin.state(), deadline, say).start()
    try:
        outcome = run_agent(argv, cwd=run.cwd, env=run.env, log_path=log_path, deadline=deadline, grace_s=spec.grace_s)
    finally:
        printer.stop()
        watcher.stop()
        opened = decoy_watch.stop() if decoy_watch is not None else []
    record = outcome_record(outcome)
    tail = _early_death_tail(outcome, place.root)
    if tail is not None:  # an agent that could not even start says why only in its log
        record["log_tail"] = tail
    say(
        f"agent {outcome.reason} after {outcome.duration_s:.0f} s; finishing evaluations in flight"
        + (f"\nthe end of its log ({log_path}):\n{tail}" if tail else "")
    )
    gateway.close()  # the agent is done: no more model calls
    return AgentRun(
        record,
        {"passes": watcher.passes, "entries": watcher.entries, "copied_bytes": watcher.copied_bytes},
        WatchedRecord(opened=opened, method=decoy_watch.method) if decoy_watch is not None else None,
        configured_model(env),
    )


def _states(root: Path, planted: Planted) -> dict[str, tuple[int, int]]:
    """The planted files' states (decoys and cover files) as the watcher keeps them: it reads a file only once its
    state changes."""
    states = {}
    for rel in planted.files:
        with contextlib.suppress(OSError):
            st = os.stat(root / rel, follow_symlinks=False)
            states[rel] = (st.st_size, st.st_mtime_ns)
    return states


#: an agent that fails within this many seconds has the end of its log in the run's message and record
EARLY_DEATH_S = 60.0
#: how much of that log: its last bytes, at most
LOG_TAIL_BYTES = 2000


def _early_death_tail(outcome: AgentOutcome, root: Path) -> str | None:
    """The end of ``agent.log`` (an agent-written file: read through :mod:`autorl.untrusted`, no link followed,
    capped) when the agent failed within :data:`EARLY_DEATH_S` seconds; None otherwise."""
    from autorl import untrusted

    if outcome.timed_out or outcome.exit_code == 0 or outcome.duration_s > EARLY_DEATH_S:
        return None
    try:
        raw = untrusted.read_tail(root, "agent.log", limit=LOG_TAIL_BYTES)
    except untrusted.UntrustedFileError:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    return text or None


def _describe(choice: SandboxChoice) -> str:
    if choice.mode == "none":
        return "no sandbox"
    return f"bwrap sandbox, network {choice.network}"


def _policy(
    plan: Plan,
    assets: Assets,
    place: Place,
    stack: contextlib.ExitStack,
    *,
    home: Path,
    env: Mapping[str, str],
    relay_ports: list[int],
) -> Policy:
    """The agent's policy for this run (:func:`autorl.sandbox.agent.agent_policy`); with the network off under
    bubblewrap, the Unix sockets that relay the grader and the gateway into it, closed with the run."""
    from autorl.sandbox import SOCKET_NAME, Relay
    from autorl.sandbox.agent import agent_policy
    from autorl.sandbox.relay import UnixToTcp, socket_name_for

    choice = plan.sandbox
    sock_dir = None
    if choice.mode == "bwrap" and choice.network == "off":
        sock_dir = Path(tempfile.mkdtemp(prefix="autorl-grader-"))
        stack.callback(shutil.rmtree, sock_dir, True)
        for port, name in [(place.port, SOCKET_NAME), *((p, socket_name_for(p)) for p in relay_ports)]:
            relay = UnixToTcp(sock_dir / name, port)
            relay.start()
            stack.callback(relay.stop)
    return agent_policy(
        workspace=place.root,
        env=env,
        model=assets.model.path,
        train_dir=Path(assets.data.train_dir),
        agent_files=plan.agent.sandbox_paths(),
        benchmark=plan.benchmark,
        autorl_home=home,
        runs_root=place.runs_root,
        store_dir=place.store_dir,
        hidden_dir=Path(assets.data.hidden_dir),
        network=choice.network,
        tmp=place.tmp_dir,
        gpus=plan.gpus.agent_has_gpus,
        relay=Relay(place.port, sock_dir, tuple(relay_ports)),
        slirp=choice.slirp,
    )
