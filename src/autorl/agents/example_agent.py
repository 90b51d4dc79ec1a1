"""The example GRPO agent (the ``example/`` folder) and the benchmarks it can train on.

It trains on ``train.jsonl`` rows of ``question`` and ``answer``, prompts with the benchmark's template
filled from ``question`` alone and rewards one completion at a time with ``Benchmark.score``. A benchmark
played in episodes, or prompted from other fields, gets a one-line refusal before the run starts instead of
a run that fails (or trains on nothing) once the budget is spent.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from autorl.errors import UsageError
from autorl.plugins.agent_folder import CommandAgent

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark


def trains_on(benchmark: Benchmark) -> bool:
    """Whether the example agent can train on ``benchmark``: single completions prompted from ``question``."""
    from autorl.evaluation.episode import EpisodeBenchmark

    if isinstance(benchmark, EpisodeBenchmark):
        return False
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(benchmark.config().prompt_template) if f is not None}
    except ValueError:
        return False
    return fields == {"question"}


def supported_benchmarks() -> list[str]:
    """The installed benchmarks the example agent trains on, by name."""
    from autorl.plugins.registry import get_benchmarks

    names = []
    for name, reg in get_benchmarks().items():
        try:
            ok = trains_on(reg.cls())
        except Exception:  # a benchmark that cannot even be built here is not one to offer
            ok = False
        if ok:
            names.append(name)
    return sorted(names)


class ExampleAgent(CommandAgent):
    """The example folder's GRPO agent, refusing at start the benchmarks it cannot train on."""

    def check_task(self, benchmark: Benchmark) -> None:
        if trains_on(benchmark):
            return
        raise UsageError(
            f"agent {self.name} cannot train on {benchmark.name}: it needs question/answer rows scored one "
            f"completion at a time, and trains on {', '.join(supported_benchmarks()) or 'none installed'}; "
            "use --agent llm or a coding agent for this task"
        )
