"""The agent's policy: what the agent's process sees of the files, the environment, the network and the other
processes (:data:`AGENT`, :func:`agent_policy`, :func:`agent_env`).

The agent is untrusted code driven by an untrusted model: it sees the host's system read-only, its workspace
read-write, the base model, the training data, the Python environment and the programs on ``PATH`` read-only,
and nothing of the operator's home, autorl's storage, the caches or the host's runtime state but what a rule
names exactly (:mod:`autorl.sandbox.programs` for ``PATH``). Its environment is the contract, the gateway's,
a few basics of the caller's, the benchmark's and the operator's, scrubbed of every key
(:func:`autorl.gateway.agent_env.scrub`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.errors import UsageError
from autorl.sandbox.host import (
    DOT_SECRETS,
    common_masks,
    dot_entries,
    extra_hidden,
    extra_read_only,
    inside,
    mask_groups,
    model_bind_paths,
    python_paths,
    python_secrets,
)
from autorl.sandbox.policy import (
    COMMON_MASKS,
    HOST_VIEW,
    MASKED,
    MASKED_AGAIN,
    PYTHON_SECRETS,
    READ_ONLY,
    READ_WRITE,
    SHOWN_LAST,
    Kind,
    Policy,
    Relay,
    Rule,
    bind,
    common_bindings,
)
from autorl.sandbox.programs import path_view

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark

#: Variables passed through from the orchestrator's environment; everything else is left out.
PASSTHROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "TZ",
    "SHELL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "OMP_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "PYTHONHASHSEED",
)

AGENT = Kind(
    name="agent",
    title="the agent (its start script, its CLI, its code)",
    view=HOST_VIEW,
    rules=(
        *COMMON_MASKS,
        Rule(
            "storage",
            MASKED,
            "autorl's home (datasets, hidden items, baselines, the ledger, the grader's "
            "stores, other runs) and the runs folder",
        ),
        Rule("hide", MASKED, "the folders AUTORL_SANDBOX_HIDE names (a study's shared home)"),
        Rule(
            "python",
            READ_ONLY,
            "the Python environment (the interpreter's prefixes and import paths, never the caller's script folder)",
        ),
        Rule(
            "path",
            READ_ONLY,
            "PATH entries under a masked folder, each alone (never a parent), and what their "
            "programs need: a link's target and its package folder (node_modules/<pkg>, a "
            "virtual environment, a Python installation), rustup's and pyenv's homes, the "
            "user's site-packages for pip --user scripts",
        ),
        Rule("model", READ_ONLY, "the base model (a hub cache snapshot with its blobs)"),
        Rule("data", READ_ONLY, "the training data"),
        Rule("agent", READ_ONLY, "the agent folder (and coding/common.sh beside it)"),
        Rule("operator", READ_ONLY, "the folders AUTORL_SANDBOX_RO names"),
        Rule(
            "workspace",
            READ_WRITE,
            "its workspace; its /tmp and /var/tmp (a folder of the run's, outside the workspace)",
        ),
        Rule("dot-files", MASKED_AGAIN, "the dot-files of a PATH entry shown whole"),
        PYTHON_SECRETS,
        Rule(
            "agent-secrets",
            MASKED_AGAIN,
            "the agent folder's .env files, .git and tools' settings (.netrc, .aws, .ssh, .config...)",
        ),
        Rule(
            "evaluation",
            MASKED_AGAIN,
            "the grader's store, the hidden items, baselines, the ledger, and what the "
            "benchmark declares as holding evaluation data (hidden_paths())",
        ),
        Rule(
            "shown",
            SHOWN_LAST,
            "the files the benchmark shows its agent (agent_paths(), checked for hidden items and keys before the run)",
        ),
    ),
    environment=(
        "the contract (TASK, WORKSPACE, MODEL_PATH, DATA_PATH, OUTPUT_DIR, GRADING_SERVER_URL, "
        "AUTORL_TOKEN, AUTORL_DEADLINE, ...), every model API's URL pointing at the run's gateway with the "
        "run's token as its key, PATH, HOME, locale, TMPDIR=/tmp, the benchmark's agent_env() (checked for "
        "hidden items and keys before the run) and the operator's --agent-env and --agent-credential; "
        "scrubbed of every credential variable, upstream key, the hidden-item secret and autorl's own "
        "settings"
    ),
    network=(
        "off: a loopback of its own, the grader and the LLM gateway relayed in through Unix sockets; on: a "
        "namespace of its own with a route out through slirp4netns, the host's loopback refused"
    ),
    processes="its own pid, ipc and uts namespaces: no harness process in its /proc; it dies with the run",
)


def agent_environment(
    contract: Mapping[str, str],
    extra: Mapping[str, str],
    base: Mapping[str, str] | None = None,
    *,
    benchmark: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The agent process's whole environment before the scrub: the ``benchmark``'s variables
    (:meth:`~autorl.Benchmark.agent_env`), then the few :data:`PASSTHROUGH` variables of ``base`` (default:
    this process's), then the contract (:attr:`AgentContext.env <autorl.agent.AgentContext.env>`), then
    the agent's own ``extra``, each over the ones before; nothing else of the orchestrator's environment."""
    base = os.environ if base is None else base
    env = dict(benchmark or {})
    env.update({k: base[k] for k in PASSTHROUGH if k in base})
    env.update(contract)
    env.update(extra)
    return env


def agent_env(
    contract: Mapping[str, str],
    extra: Mapping[str, str],
    *,
    benchmark: Mapping[str, str],
    gateway_url: str,
    token: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The agent's final environment: :func:`agent_environment` scrubbed of keys, credential variables, the
    hidden-item secret and the harness's settings, with the gateway's variables in place of every key."""
    from autorl.gateway.agent_env import scrub

    return scrub(agent_environment(contract, extra, environ, benchmark=benchmark), gateway_url, token, environ)


def agent_masks(autorl_home: Path, runs_root: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders no agent sees (but for what a rule shows in them)."""
    return [autorl_home, runs_root, *common_masks(environ), *extra_hidden(environ)]


def refuse_uncovering(who: str, paths: Sequence[Path], masked: Sequence[Path]) -> None:
    """A :class:`UsageError` (one line naming ``who`` and the path) for a path that is, or holds, a masked folder:
    showing it would show what the policy masks (the operator's home, autorl's storage)."""
    for path in paths:
        for real in dict.fromkeys((path, path.resolve())):
            covered = [m for m in masked if inside(m, real)]
            if covered:
                raise UsageError(
                    f"{who} names {path}, which holds {covered[0]} (masked for every agent); name the "
                    "files the agent needs instead"
                )


def agent_policy(
    *,
    workspace: Path,
    env: Mapping[str, str],
    model: Path,
    train_dir: Path,
    agent_files: Sequence[Path],
    benchmark: Benchmark,
    autorl_home: Path,
    runs_root: Path,
    store_dir: Path,
    hidden_dir: Path,
    network: str,
    tmp: Path | None = None,
    gpus: bool = False,
    relay: Relay | None = None,
    slirp: str | None = "auto",
    environ: Mapping[str, str] | None = None,
) -> Policy:
    """The agent's :class:`Policy` for one run. ``env`` is its final environment (:func:`agent_env`); the
    operator's ``PATH`` (``environ``) decides which programs under masked folders are shown. ``agent_files`` are what the agent asks to read
    (:meth:`~autorl.agent.Agent.sandbox_paths`); a file the benchmark shows that is, or holds, a masked
    folder is refused in one line."""
    masked = agent_masks(autorl_home, runs_root, environ)
    shown = benchmark.agent_paths()
    refuse_uncovering(f"benchmark {benchmark.name}: agent_paths()", shown, masked)
    refuse_uncovering("the agent's sandbox_paths()", agent_files, masked)
    rules = AGENT.rule
    # the programs of the operator's PATH, and the tool homes the operator's environment names: never what the
    # agent's own environment says (an agent folder's env_vars or a plugin's agent_env() write it)
    operator = os.environ if environ is None else environ
    programs = path_view(operator.get("PATH", ""), masked, operator)
    python = python_paths()
    files = [
        *common_bindings(AGENT, mask_groups(environ)),
        *bind(rules("storage"), [autorl_home, runs_root]),
        *bind(rules("hide"), extra_hidden(environ)),
        *bind(rules("python"), python),
        *bind(rules("path"), programs.shown),
        *bind(rules("model"), [model, *model_bind_paths(model)]),
        *bind(rules("data"), [Path(train_dir)]),
        *bind(rules("agent"), agent_files),
        *bind(rules("operator"), extra_read_only(environ)),
        *bind(rules("workspace"), [workspace]),
        *bind(
            rules("evaluation"),
            [store_dir, hidden_dir, autorl_home / "baselines", autorl_home / "autorl.db", *benchmark.hidden_paths()],
        ),
        *bind(rules("dot-files"), programs.hidden),
        *bind(PYTHON_SECRETS, python_secrets(python)),
        *bind(rules("agent-secrets"), [s for f in agent_files if f.is_dir() for s in dot_entries(f, DOT_SECRETS)]),
        *bind(rules("shown"), shown),
    ]
    return Policy(
        kind=AGENT.name,
        view=AGENT.view,
        files=tuple(files),
        env=dict(env),
        cwd=workspace,
        network=network,
        tmp=tmp,
        gpus=gpus,
        relay=relay or Relay(),
        slirp=slirp,
        hostname="autorl-agent",
        new_session=False,
    )
