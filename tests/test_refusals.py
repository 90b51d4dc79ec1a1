"""Bad values of `autorl run` are refused before anything starts: one line naming the option and the cause, exit
status 2, and nothing left behind (no workspace, no grader store, no row)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import cli
from .test_run import agent_folder, stub_base  # noqa: F401 (a fixture)


def _run(home: Path, agent: Path, base: Path, *extra: str) -> tuple[int, str]:
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "60",
        "--backend",
        "scripted",
        "--sandbox",
        "none",
        *extra,
        env={"AUTORL_HOME": str(home)},
    )
    return proc.returncode, proc.stderr


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--limit", "-3"), "--limit must be a positive number of items"),
        (("--limit", "0"), "--limit must be a positive number of items"),
        (("--port", "70000"), "--port must be between 1 and 65535"),
        (
            ("--benchmark-option", "chat_template=maybe"),
            '--benchmark-option chat_template="maybe": echo takes true or false',
        ),
        (
            ("--benchmark-option", "chat_templte=true"),
            "--benchmark-option chat_templte: echo has no such option (did you "
            "mean chat_template?); it takes chat_template",
        ),
    ],
)
def test_bad_values_are_refused_before_anything_starts(
    tmp_path: Path,
    stub_base: Path,  # noqa: F811
    extra: tuple[str, ...],
    says: str,
) -> None:
    home = tmp_path / "home"
    agent = agent_folder(tmp_path / "agents", "idle", "echo idle\n")
    code, err = _run(home, agent, stub_base, *extra)
    (line,) = err.strip().splitlines()
    assert code == 2 and line.startswith(f"error: {says}")
    assert not home.exists() or not any(home.iterdir())  # refused before a workspace, a grader or a row


def test_a_port_in_use_is_refused_with_its_cause(tmp_path: Path, stub_base: Path) -> None:  # noqa: F811
    home = tmp_path / "home"
    agent = agent_folder(tmp_path / "agents", "idle", "echo idle\n")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _run(home, agent, stub_base, "--port", str(port))
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: --port {port} cannot be used on 127.0.0.1") and "in use" in line
    assert not home.exists() or not any(home.iterdir())


def test_an_autorl_home_that_cannot_be_created_is_one_line(tmp_path: Path, stub_base: Path) -> None:  # noqa: F811
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    agent = agent_folder(tmp_path / "agents", "idle", "echo idle\n")
    code, err = _run(blocker / "home", agent, stub_base)
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: AUTORL_HOME {blocker / 'home'} cannot be created") and "AUTORL_HOME to a" in line


def test_declared_options_take_their_types_and_values_only() -> None:
    from autorl.benchmark import check_options
    from autorl.errors import UsageError

    declared = {"source": ("auto", "official"), "max_steps": int, "temperature": float, "data_dir": str}
    check_options("b", declared, {"source": "official", "max_steps": 3, "temperature": 1, "chat_template": False})
    check_options("b", None, {"anything": [1], "chat_template": True})  # undeclared: any name
    for bad, says in [
        ({"source": "maybe"}, 'source="maybe": b takes one of "auto", "official"'),
        ({"max_steps": 2.5}, "takes an integer"),
        ({"max_steps": True}, "takes an integer"),
        ({"temperature": "hot"}, "takes a number"),
        ({"data_dir": 3}, "takes a string"),
        ({"chat_template": "yes"}, "takes true or false"),
        ({"max_step": 3}, "did you mean max_steps?"),
    ]:
        with pytest.raises(UsageError, match=re.escape(says)):
            check_options("b", declared, bad)
    with pytest.raises(UsageError, match="chat_template"):
        check_options("b", None, {"chat_template": "maybe"})


#: every option each bundled benchmark reads: a declared name is one its code reads (see each plugin's README)
BUNDLED_OPTIONS = {
    "gsm8k": {"data_dir", "raw_dir"},
    "humaneval": {"samples", "temperature", "k", "timeout_s", "isolation"},
    "alfworld": {
        "chat",
        "max_new_tokens",
        "max_steps",
        "examples",
        "source",
        "official_dev",
        "train_games",
        "dev_games",
        "test_games",
    },
    "webshop": {
        "chat",
        "max_new_tokens",
        "max_steps",
        "examples",
        "source",
        "products_per_type",
        "train_goals",
        "dev_goals",
        "test_goals",
    },
    "alpacaeval": {"max_new_tokens", "train_size", "dev_size", "data_dir"},
}


@pytest.mark.parametrize("name", sorted(BUNDLED_OPTIONS))
def test_every_bundled_benchmark_declares_its_options_and_refuses_others(name: str) -> None:
    from autorl import get_benchmark
    from autorl.errors import UnknownNameError, UsageError

    try:
        cls = get_benchmark(name)
    except UnknownNameError:
        pytest.skip(f"{name} is not installed")
    assert set(cls.declared_options or {"<undeclared>"}) == BUNDLED_OPTIONS[name]
    with pytest.raises(UsageError, match=f"--benchmark-option max_new_tokenz: {name} has no such option"):
        cls({"max_new_tokenz": 10})
    first = sorted(BUNDLED_OPTIONS[name])[0]
    with pytest.raises(UsageError, match=f"--benchmark-option {first}="):
        cls({first: [1, 2]})  # no declared kind takes a list


def test_a_missing_torch_names_the_extra_to_install_through_the_constraints(tmp_path: Path) -> None:
    # a Python where torch cannot be imported, as on an install without the hf extra
    blocked = "import sys; sys.modules['torch'] = None; from autorl.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", blocked, "eval", "--task", "arith", "--model", "autorl:tiny"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "AUTORL_HOME": str(tmp_path / "home")},
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "needs an optional dependency that is not installed: run `pip install -c constraints.txt 'autorl[hf]'`"
        )
    )
