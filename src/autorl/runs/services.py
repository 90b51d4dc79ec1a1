"""Steps 4 and 5 of a run: the grader on the run's port with its own tokens and the LLM gateway on a free one,
each in its own process; then the baseline, scored by the grader exactly as submissions will be."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess, grader_log_path

if TYPE_CHECKING:
    from autorl.progress import Say
    from autorl.runs.place import Place
    from autorl.runs.plan import Assets, Plan

__all__ = ["Services", "baseline", "start_services"]


@dataclass(frozen=True)
class Services:
    """The run's grader and LLM gateway, each in its own process."""

    config: GraderConfig
    grader: GraderProcess
    gateway: Any  # autorl.gateway.GatewayProcess (imported lazily)

    def stop(self) -> None:
        self.gateway.stop()
        self.grader.stop()


def start_services(plan: Plan, assets: Assets, place: Place, home: Path, eval_timeout: float, limit: int | None,
                   llm_budget_usd: float | None, llm_budget_tokens: int | None,
                   llm_prices: Path | str | None, decoy_tokens: dict[str, str] | None = None,
                   grader_options: Mapping[str, Any] | None = None) -> Services:
    """The grader on the run's port with its own tokens, and the LLM gateway on a free one; both refuse the
    run's ``decoy_tokens`` as any wrong token and note them (:mod:`autorl.decoys`). ``grader_options`` set
    further fields of its :class:`~autorl.grader.config.GraderConfig` (the keep policy, the quota)."""
    decoy_tokens = dict(decoy_tokens or {})
    config = GraderConfig.for_run(task=plan.task, workspace=place.root, output_dir=place.workspace.output,
                                  store_dir=place.store_dir, data=assets.data, base=assets.model, backend=plan.backend,
                                  home=home, backend_options=plan.backend_options,
                                  benchmark_options=plan.benchmark_options, eval_timeout=eval_timeout,
                                  workers=plan.gpus.grader_workers(), limit=limit,
                                  decoy_tokens=decoy_tokens, **dict(grader_options or {}))
    grader = GraderProcess(config, place.store_dir / "config.json", place.port, grader_log_path(place.store_dir))
    try:
        # an agent without a network gets none through its upstream's web tools either
        offline = plan.sandbox.mode == "bwrap" and plan.sandbox.network == "off"
        from autorl.gateway import start_gateway

        gateway = start_gateway(place.gateway_dir, llm_budget_usd, llm_budget_tokens, llm_prices,
                                 server_tools=not offline, decoy_tokens=decoy_tokens)
    except BaseException:
        grader.stop()
        raise
    return Services(config, grader, gateway)


def baseline(services: Services, eval_timeout: float, timeout: float, say: Say) -> float:
    """The base model scored by the grader exactly as submissions will be; returns the agent's deadline."""
    services.grader.wait_ready()
    services.gateway.wait_ready()
    grader = services.grader
    say(f"grader at {grader.url}; evaluating the baseline")
    base = grader.surviving(lambda: grader.admin.baseline(timeout=eval_timeout))
    say(f"baseline: {base['score']:.2f} (n={base['n']}, 95% CI {base['ci95'][0]:.2f}-{base['ci95'][1]:.2f})")
    deadline = time.time() + timeout
    grader.surviving(lambda: grader.admin.set_deadline(deadline))
    return deadline
