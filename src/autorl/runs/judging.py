"""The judged audit of a recorded run: an LLM gateway of its own for the judge (the operator's keys from this
process's environment, the judge's own budget; never the run's gateway or the agent's token), the judgement
(:mod:`autorl.audit.judge`), then the gateway stopped. What the judge was shown and not shown is kept beside
its calls (``coverage.json``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from autorl.audit.budget import AUDIT_BUDGET_S
from autorl.errors import UsageError

if TYPE_CHECKING:
    from autorl.audit.judge import Judgement
    from autorl.record.schema import ResultRecord


def ask_judge(
    result: ResultRecord,
    home: Path,
    model: str,
    *,
    samples: int = 1,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    budget_s: float | None = AUDIT_BUDGET_S,
    prices: Path | str | None = None,
) -> Judgement:
    """The judgement of ``result``, its calls and coverage recorded under ``<home>/judge/<run id>/<time>``."""
    from autorl.audit.judge import judge_run
    from autorl.gateway import start_gateway

    if not model.strip():
        raise UsageError("--judge needs a model name")
    if samples < 1:
        raise UsageError("--judge-samples must be at least 1")
    if budget_s is not None and not budget_s > 0:
        raise UsageError("--judge-budget-s must be a positive number of seconds")
    folder = home / "judge" / str(result["row"]["run_id"]) / time.strftime("%Y%m%d-%H%M%S")
    folder.parent.mkdir(parents=True, exist_ok=True)
    gateway = start_gateway(folder, budget_usd, budget_tokens, prices, server_tools=False)
    try:
        gateway.wait_ready()
        judged = judge_run(
            result, url=gateway.url, token=gateway.config.token, model=model, samples=samples, budget_s=budget_s
        )
    finally:
        gateway.stop()
    (folder / "coverage.json").write_text(json.dumps(judged.coverage(), indent=1))
    return judged
