"""The policy of model-generated programs (HumanEval completions and the like): :data:`PROGRAM`,
:func:`program_policy`.

A program the model under evaluation wrote runs with the system's folders and its interpreter read-only, a
private work folder as the only place it writes, no network, no home, namespaces of its own and a few plain
variables. The benchmark that runs it adds what the policy cannot say: resource limits and, when the grader is
root, an unprivileged user id (autorl-humaneval's ``sandbox`` module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from autorl.sandbox.host import mask_groups, python_paths, python_secrets
from autorl.sandbox.policy import (
    COMMON_MASKS,
    MASKED,
    PYTHON_SECRETS,
    READ_ONLY,
    READ_WRITE,
    SYSTEM_VIEW,
    Kind,
    Policy,
    Rule,
    bind,
    common_bindings,
)

PROGRAM = Kind(
    name="program",
    title="model-generated programs (HumanEval completions)",
    view=SYSTEM_VIEW,
    rules=(
        *COMMON_MASKS,
        Rule("storage", MASKED, "what the grader names: its storage and the evaluation data"),
        Rule("python", READ_ONLY, "its interpreter's prefixes and import paths"),
        PYTHON_SECRETS,
        Rule("work", READ_WRITE, "a private work folder (the program's file), thrown away after"),
    ),
    environment="PATH=/usr/bin:/bin, HOME and TMPDIR its work folder, LANG, PYTHONDONTWRITEBYTECODE, "
    "OMP_NUM_THREADS=1; nothing else",
    network="none, a loopback of its own",
    processes="its own user, pid, ipc and uts namespaces and terminal session; resource limits and, when the grader "
    "is root, an unprivileged user id (the benchmark's)",
)


def program_env(workdir: Path) -> dict[str, str]:
    """The whole environment of a model-generated program."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
    }


def program_policy(
    workdir: Path,
    *,
    hidden: Sequence[Path] = (),
    reachable: Callable[[Path], bool] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Policy:
    """A model-generated program's :class:`Policy`: ``workdir`` read-write, the interpreter read-only, ``hidden``
    (the grader's storage, evaluation data) masked. ``reachable`` keeps only the paths the unprivileged user the
    program runs as can reach (bubblewrap cannot show the others)."""
    ok = reachable or (lambda _p: True)
    rules = PROGRAM.rule
    python = [p for p in python_paths() if ok(p)]
    files = [
        *common_bindings(PROGRAM, {k: [p for p in ps if ok(p)] for k, ps in mask_groups(environ).items()}),
        *bind(rules("storage"), [p for p in hidden if ok(p)]),
        *bind(rules("python"), python),
        *bind(PYTHON_SECRETS, [p for p in python_secrets(python) if ok(p)]),
        *bind(rules("work"), [workdir]),
    ]
    return Policy(
        kind=PROGRAM.name,
        view=PROGRAM.view,
        files=tuple(files),
        env=program_env(workdir),
        cwd=workdir,
        hostname="autorl-program",
    )
