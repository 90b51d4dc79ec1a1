"""Developer sessions: `nox -s tests`, `nox -s plugins`, `nox -s lint`, `nox -s e2e`, `nox -s demo`, `nox -s harbor`,
`nox -s exports`, `nox -s cluster`,
`nox -s opencompass`."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests", "plugins"]
nox.options.reuse_existing_virtualenvs = True
ROOT = Path(__file__).parent
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
#: the harbor release the exported tasks are checked against (`autorl export harbor`)
HARBOR = "harbor==0.25.0"
#: the Every Eval Ever release whose own validator checks `autorl export eee` (it needs Python >= 3.12)
EEE = "every-eval-ever==0.3.0"
#: the engines the cluster tests start (ray is large: about 70 MB of wheels)
CLUSTER = ("ray==2.60.0", "submitit==1.5.4")
#: the OpenCompass the smith plugin's opencompass mode is checked against, in a venv of its own (it conflicts
#: with trl); the CPU torch of constraints.txt keeps it from pulling a CUDA build
OPENCOMPASS = ("opencompass==0.5.4", "pyarrow<22", "transformers<5", "torch==2.13.0")
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
#: the core's extras a plugin's tests need beside it: the smith README's walk-through ends in an `autorl run`
#: of the example agent (GRPO with trl) on autorl:tiny
PLUGIN_EXTRAS = {"autorl-smith": "[hf,train]"}


@nox.session
def tests(session: nox.Session) -> None:
    """Core tests, with the example third-party plugin and every plugin installed (each plugin's own tests run
    once, in `nox -s plugins`, in a venv holding only the core and that plugin)."""
    session.install(
        *CONSTRAINTS,
        "-e",
        ".[test]",
        "-e",
        "tests/example_plugin",
        *[arg for p in PLUGINS for arg in ("-e", f"plugins/{p}")],
    )
    session.run("pytest", "tests", *session.posargs)


@nox.session
@nox.parametrize("plugin", PLUGINS)
def plugins(session: nox.Session, plugin: str) -> None:
    """Each plugin in a fresh venv holding only the core and that plugin, proving it installs alone."""
    session.install(*CONSTRAINTS, f".{PLUGIN_EXTRAS.get(plugin, '')}", f"./plugins/{plugin}", "pytest")
    session.run("pytest", f"plugins/{plugin}/tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and the formatter's check) and mypy strict on src/."""
    session.install(*CONSTRAINTS, "-e", ".[lint]")
    session.run("ruff", "check", "src", "tests", "plugins")
    session.run("ruff", "format", "--check", "src", "tests", "plugins")
    session.run("mypy")


@nox.session
def e2e(session: nox.Session) -> None:
    """The end-to-end `autorl run` tests only (marked e2e: real grader, real agent subprocesses, the demo)."""
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "tests/example_plugin")
    session.run("pytest", "-m", "e2e", *session.posargs)


@nox.session
def cluster(session: nox.Session) -> None:
    """The executors on real engines (marked cluster): a single-node Slurm cluster and a `ray start --head` one."""
    if shutil.which("slurmctld") is None and os.geteuid() == 0:  # the distribution's packages, where apt is
        install = "apt-get install -y -q slurm-wlm munge >/dev/null"
        session.run("sh", "-c", f"{install} || {{ apt-get update -q >/dev/null && {install}; }}", external=True)
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "tests/example_plugin", *CLUSTER)
    session.run("pytest", "-m", "cluster", "tests/test_cluster_slurm.py", "tests/test_cluster_ray.py", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """The offline demo run: the example GRPO agent on arith with the built-in tiny model."""
    session.install(*CONSTRAINTS, "-e", ".[hf,train]")
    session.run("autorl", "run", "--agent", "example", "--task", "arith", "--model", "autorl:tiny", "--timeout", "300")


def _python312() -> str | None:
    """A Python >= 3.12 that runs, for harbor and every-eval-ever: AUTORL_HARBOR_PYTHON, python3.12 on PATH, or
    one of pyenv's."""
    candidates = [
        os.environ.get("AUTORL_HARBOR_PYTHON"),
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3"))),
    ]
    probe = "import sys; sys.exit(sys.version_info < (3, 12))"
    for python in filter(None, candidates):
        if subprocess.run([python, "-c", probe], capture_output=True).returncode == 0:
            return python
    return None


@nox.session
def harbor(session: nox.Session) -> None:
    """Exported Harbor tasks checked by the real harbor package (its loader, `harbor lint`, `harbor run` trials).

    autorl and its tests run on this session's Python (the CPU torch wheel is pinned for it); harbor, which needs
    Python >= 3.12, gets a venv of its own, named to the tests in AUTORL_HARBOR.
    """
    python = _python312()
    if python is None:
        session.error("harbor needs Python >= 3.12: put python3.12 on PATH or name it in AUTORL_HARBOR_PYTHON")
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "tests/example_plugin")
    venv = Path(session.cache_dir) / HARBOR.replace("==", "-")
    command = venv / "bin" / "harbor"
    if not command.is_file():
        session.run(python, "-m", "venv", "--clear", str(venv), external=True)
        session.run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", HARBOR, external=True)
    session.run("pytest", "tests/test_harbor_run.py", *session.posargs, env={"AUTORL_HARBOR": str(command)})


@nox.session
def exports(session: nox.Session) -> None:
    """Recorded runs exported, and checked by the tools that read the exports: `autorl export eee` records by the
    every-eval-ever package's own validator (`every_eval_ever validate`, in a venv of its own on Python >= 3.12,
    named to the tests in AUTORL_EEE), `autorl export mlflow` into a real local MLflow store (SQLite) read back
    with MLflow's client (the mlflow extra: mlflow-skinny pulls fastapi, opentelemetry and a cloud SDK that the
    main test venv does without)."""
    python = _python312()
    if python is None:
        session.error("every-eval-ever needs Python >= 3.12: put python3.12 on PATH or name it in AUTORL_HARBOR_PYTHON")
    session.install(*CONSTRAINTS, "-e", ".[mlflow]", "-e", "tests/example_plugin", "pytest>=8", "pytest-timeout>=2")
    venv = Path(session.cache_dir) / EEE.replace("==", "-")
    command = venv / "bin" / "every_eval_ever"
    if not command.is_file():
        session.run(python, "-m", "venv", "--clear", str(venv), external=True)
        session.run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", EEE, external=True)
    session.run(
        "pytest",
        "tests/test_export_eee.py",
        "tests/test_export_mlflow.py",
        *session.posargs,
        env={"AUTORL_EEE": str(command)},
    )


@nox.session
def opencompass(session: nox.Session) -> None:
    """The smith plugin's opencompass mode against a real OpenCompass (marked opencompass): a folder's hidden items
    scored by OpenCompass, as its local custom dataset with the tiny model, and by per_sample, item by item."""
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "plugins/autorl-smith")
    venv = Path(session.cache_dir) / OPENCOMPASS[0].replace("==", "-")
    python = venv / "bin" / "python"
    if subprocess.run([str(python), "-c", "import opencompass"], capture_output=True).returncode != 0:
        session.run(str(Path(session.bin) / "python"), "-m", "venv", "--clear", str(venv), external=True)
        session.run(str(python), "-m", "pip", "install", "-q", *OPENCOMPASS, external=True)
    session.run(
        "pytest",
        "-m",
        "opencompass",
        "-s",
        "plugins/autorl-smith/tests/test_smith.py",
        *session.posargs,
        env={"AUTORL_OPENCOMPASS_PYTHON": str(python)},
    )
