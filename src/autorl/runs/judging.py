"""The judged audit of a recorded run: an LLM gateway of its own for the judge (the operator's keys from this
process's environment, the judge's own budget; never the run's gateway or the agent's token), the judge's
``judge:*`` flags (:mod:`autorl.audit.judge`), then the gateway stopped."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.errors import UsageError

if TYPE_CHECKING:
    from autorl.audit.flags import Flag


def judge_flags(result: dict[str, Any], home: Path, model: str, *, samples: int = 1, budget_usd: float | None = None,
                budget_tokens: int | None = None, prices: Path | str | None = None) -> list[Flag]:
    """The judge's flags for ``result``, its calls recorded under ``<home>/judge/<run id>/<time>``."""
    from autorl.audit.judge import judge_run
    from autorl.gateway import start_gateway

    if not model.strip():
        raise UsageError("--judge needs a model name")
    if samples < 1:
        raise UsageError("--judge-samples must be at least 1")
    folder = home / "judge" / str(result["row"]["run_id"]) / time.strftime("%Y%m%d-%H%M%S")
    folder.parent.mkdir(parents=True, exist_ok=True)
    gateway = start_gateway(folder, budget_usd, budget_tokens, prices, server_tools=False)
    try:
        gateway.wait_ready()
        return judge_run(result, url=gateway.url, token=gateway.config.token, model=model, samples=samples)
    finally:
        gateway.stop()
