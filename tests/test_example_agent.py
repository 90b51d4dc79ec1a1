"""The example GRPO agent runs only where it can train, and says so in one line before a run starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorl.agents.example_agent import supported_benchmarks, trains_on
from autorl.plugins.registry import get_benchmark

from .conftest import cli


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("arith", True),
        ("gsm8k", True),
        ("alfworld", False),
        ("webshop", False),
        ("alpacaeval", False),
        ("humaneval", False),
    ],
)
def test_the_example_agent_trains_only_on_question_answer_benchmarks(task: str, expected: bool) -> None:
    assert trains_on(get_benchmark(task)()) is expected


@pytest.mark.parametrize("task", ["alfworld", "webshop", "alpacaeval"])
def test_an_unsupported_benchmark_is_refused_at_start_in_one_line(task: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = cli(
        "run",
        "--agent",
        "example",
        "--task",
        task,
        "--model",
        "autorl:tiny",
        "--timeout",
        "30",
        env={"AUTORL_HOME": str(home)},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: agent example cannot train on {task}:")
    assert "arith" in lines[0] and "gsm8k" in lines[0] and "Traceback" not in proc.stderr
    assert not (home / "runs").exists()  # nothing prepared, no model built
    assert set(supported_benchmarks()) >= {"arith", "gsm8k"} and task not in supported_benchmarks()
