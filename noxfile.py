"""Developer sessions: `nox -s tests`, `nox -s plugins`, `nox -s lint`, `nox -s e2e`, `nox -s demo`."""

from __future__ import annotations

from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests", "plugins"]
nox.options.reuse_existing_virtualenvs = True
ROOT = Path(__file__).parent
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
PLUGINS = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())


@nox.session
def tests(session: nox.Session) -> None:
    """Core tests and every plugin's tests, with the example third-party plugin and all plugins installed."""
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "tests/example_plugin",
                    *[arg for p in PLUGINS for arg in ("-e", f"plugins/{p}")])
    session.run("pytest", "tests", *[f"plugins/{p}/tests" for p in PLUGINS], *session.posargs)


@nox.session
@nox.parametrize("plugin", PLUGINS)
def plugins(session: nox.Session, plugin: str) -> None:
    """Each plugin in a fresh venv holding only the core and that plugin, proving it installs alone."""
    session.install(*CONSTRAINTS, ".", f"./plugins/{plugin}", "pytest")
    session.run("pytest", f"plugins/{plugin}/tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint) and mypy strict on src/."""
    session.install(*CONSTRAINTS, "-e", ".[lint]")
    session.run("ruff", "check", "src", "tests", "plugins")
    session.run("mypy")


@nox.session
def e2e(session: nox.Session) -> None:
    """The end-to-end `autorl run` tests only (marked e2e: real grader, real agent subprocesses, the demo)."""
    session.install(*CONSTRAINTS, "-e", ".[test]", "-e", "tests/example_plugin")
    session.run("pytest", "-m", "e2e", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """The offline demo run: the example GRPO agent on arith with the built-in tiny model."""
    session.install(*CONSTRAINTS, "-e", ".[hf,train]")
    session.run("autorl", "run", "--agent", "example", "--task", "arith", "--model", "autorl:tiny", "--timeout", "300")
