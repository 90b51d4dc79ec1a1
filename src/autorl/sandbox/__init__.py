"""Isolation of untrusted processes: one policy per kind, one launcher, and the choice of sandbox.

What an untrusted process cannot see it cannot use. Each kind has a policy module that describes everything it
may see (:class:`~autorl.sandbox.policy.Policy`): the agent (:mod:`autorl.sandbox.agent`), third-party scorer
code such as a smith folder's ``eval.py`` (:mod:`autorl.sandbox.scorer`) and model-generated programs
(:mod:`autorl.sandbox.program`). One launcher (:mod:`autorl.sandbox.launcher`) turns a policy into the bubblewrap
command line, or, with the sandbox off, into the command with the policy's environment only. The trust model
(docs/sandbox.md) is rendered from the kinds (:func:`~autorl.sandbox.policy.trust_table`).

Under bubblewrap the agent gets the system and the Python environment read-only, its workspace read-write, the
base model and the training data read-only, a private /tmp (or a per-run host directory, which ``TMPDIR`` then
names) and an empty private ``$HOME``; everything that holds evaluation data is not there at all: the grader's
storage, ``AUTORL_HOME``, the Hugging Face cache, the installed files that benchmark plugins declare as holding
test data, the host's ``TMPDIR`` and the host's sockets and runtime state (``/run``, ``/dev/shm``). It runs in
new pid, ipc and uts namespaces and dies with the orchestrator.

It always gets a network namespace of its own, so that the host's abstract Unix sockets and whatever listens
on the host's loopback are out of reach. With the network off it has only loopback; with it on,
slirp4netns gives it a route out with the host's loopback refused and a DNS forwarder (see
:mod:`autorl.sandbox.netns`). Either way the grader is reached through a Unix socket bound into the sandbox
and relayed to ``127.0.0.1:<port>`` inside it (:mod:`autorl.sandbox.relay`), so ``GRADING_SERVER_URL`` stays
the same. Where slirp4netns cannot run, network on falls back to the host's network with a warning, and the run
records its sandbox mode as ``bwrap+hostnet``.

``AUTORL_BWRAP`` names the bubblewrap executable (default ``bwrap`` on PATH); ``AUTORL_SANDBOX_RO`` lists
further host paths (``os.pathsep``-separated) the agent may read, e.g. a shared dataset directory.
Evaluation data stays hidden even when one of them holds it.

Plugins that run third-party or model-written code import what they need from here (the scorer's and the
program's policies, the launcher): the one place, besides ``autorl`` itself, a plugin imports autorl from.
"""

from __future__ import annotations

from autorl.sandbox.choice import MODES, NETWORKS, SandboxChoice, bwrap_available, bwrap_binary, choose
from autorl.sandbox.host import (
    RUNTIME_DIRS,
    extra_hidden,
    extra_read_only,
    gpu_devices,
    hf_cache_dirs,
    model_bind_paths,
    python_paths,
)
from autorl.sandbox.launcher import INNER_SOCKET_DIR, Launch, bwrap_argv, launch
from autorl.sandbox.policy import Binding, Kind, Policy, Relay, Rule, trust_table
from autorl.sandbox.program import program_env, program_policy
from autorl.sandbox.relay import SOCKET_NAME
from autorl.sandbox.scorer import (
    SCORER_SANDBOX_ENV,
    FolderChanged,
    ScratchFolder,
    copy_code,
    file_digests,
    folder_digest,
    scorer_mode,
    scorer_policy,
)

__all__ = [
    "INNER_SOCKET_DIR",
    "MODES",
    "NETWORKS",
    "RUNTIME_DIRS",
    "SCORER_SANDBOX_ENV",
    "SOCKET_NAME",
    "Binding",
    "FolderChanged",
    "Kind",
    "Launch",
    "Policy",
    "Relay",
    "Rule",
    "SandboxChoice",
    "ScratchFolder",
    "bwrap_argv",
    "bwrap_available",
    "bwrap_binary",
    "choose",
    "copy_code",
    "extra_hidden",
    "extra_read_only",
    "file_digests",
    "folder_digest",
    "gpu_devices",
    "hf_cache_dirs",
    "launch",
    "model_bind_paths",
    "program_env",
    "program_policy",
    "python_paths",
    "scorer_mode",
    "scorer_policy",
    "trust_table",
]
