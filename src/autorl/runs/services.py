"""Steps 4 and 5 of a run: the grader on the run's port with its own tokens and the LLM gateway on a free one,
each in its own process; then the baseline, scored by the grader exactly as submissions will be; then the agent's
clock started (:func:`start_clock`: its deadline from the run's time limit)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autorl.evaluation.stats import Z95
from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess, grader_log_path

if TYPE_CHECKING:
    from autorl.runs.place import Place
    from autorl.runs.plan import Assets, Plan
    from autorl.runs.progress import Say
    from autorl.runs.spec import Limits, RunSpec

__all__ = ["LIMIT_WARN_POINTS", "Services", "baseline", "limit_warning", "start_clock", "start_services"]


@dataclass(frozen=True)
class Services:
    """The run's grader and LLM gateway, each in its own process."""

    config: GraderConfig
    grader: GraderProcess
    gateway: Any  # autorl.gateway.GatewayProcess (imported lazily)

    def stop(self) -> None:
        self.gateway.stop()
        self.grader.stop()


def start_services(
    plan: Plan,
    assets: Assets,
    place: Place,
    home: Path,
    spec: RunSpec,
    decoy_tokens: dict[str, str] | None = None,
    grader_options: Mapping[str, Any] | None = None,
) -> Services:
    """The grader on the run's port with its own tokens (the spec's evaluation timeout, item limit and
    submission limit), and the LLM gateway on a free one (the spec's LLM budgets and prices); both refuse the
    run's ``decoy_tokens`` as any wrong token and note them (:mod:`autorl.decoys`). ``grader_options`` set
    further fields of its :class:`~autorl.grader.config.GraderConfig` (the keep policy, the quota)."""
    decoy_tokens = dict(decoy_tokens or {})
    limits = spec.limits
    options = dict(grader_options or {})
    if limits.submissions is not None:
        options["max_submissions"] = limits.submissions
    config = GraderConfig.for_run(
        task=plan.task,
        workspace=place.root,
        output_dir=place.workspace.output,
        store_dir=place.store_dir,
        data=assets.data,
        base=assets.model,
        backend=plan.backend,
        home=home,
        backend_options=plan.backend_options,
        benchmark_options=plan.benchmark_options,
        eval_timeout=spec.eval_timeout,
        workers=plan.gpus.grader_workers(),
        limit=spec.limit,
        decoy_tokens=decoy_tokens,
        **options,
    )
    grader = GraderProcess(config, place.store_dir / "config.json", place.port, grader_log_path(place.store_dir))
    try:
        # an agent without a network gets none through its upstream's web tools either
        offline = plan.sandbox.mode == "bwrap" and plan.sandbox.network == "off"
        from autorl.gateway import start_gateway

        gateway = start_gateway(
            place.gateway_dir,
            limits.usd,
            limits.tokens,
            spec.llm_prices,
            server_tools=not offline,
            decoy_tokens=decoy_tokens,
        )
    except BaseException:
        grader.stop()
        raise
    return Services(config, grader, gateway)


#: a --limit that leaves a score's 95% interval wider than this many points either side is warned about
LIMIT_WARN_POINTS = 10.0


def limit_warning(limit: int | None, n: int) -> str | None:
    """The warning for a ``--limit`` that leaves ``n`` items a split: a score on them has a 95% interval up to
    ``1.96 * sqrt(0.25 / n)`` wide either side (at 50%), and differences (improvements, the dev-test gap) about
    as wide are what sampling gives; None when no limit was given or the interval is within
    :data:`LIMIT_WARN_POINTS`."""
    if limit is None or n <= 0:
        return None
    half = 100 * Z95 * math.sqrt(0.25 / n)
    if half <= LIMIT_WARN_POINTS:
        return None
    return (
        f"warning: --limit {limit}: a score on {n} items has a 95% interval up to +-{half:.1f} points, so "
        f"improvements and dev-test gaps of about that size are sampling noise (about {_items_for(10.0)} items "
        f"give +-{LIMIT_WARN_POINTS:.0f})"
    )


def _items_for(points: float) -> int:
    return math.ceil((100 * Z95 * 0.5 / points) ** 2)


def baseline(services: Services, eval_timeout: float, say: Say) -> None:
    """The base model scored by the grader exactly as submissions will be (once the grader and the gateway
    answer)."""
    services.grader.wait_ready()
    services.gateway.wait_ready()
    grader = services.grader
    say(f"grader at {grader.url}; evaluating the baseline")
    base = grader.surviving(lambda: grader.admin.baseline(timeout=eval_timeout))
    say(f"baseline: {base['score']:.2f} (n={base['n']}, 95% CI {base['ci95'][0]:.2f}-{base['ci95'][1]:.2f})")
    warning = limit_warning(services.config.limit, int(base["n"]))
    if warning:
        say(warning)


def start_clock(services: Services, limits: Limits) -> float:
    """The agent's clock started now: its deadline, now plus its time limit, told to the grader (which takes no
    submission after it) and returned."""
    deadline = limits.deadline(time.time())
    grader = services.grader
    grader.surviving(lambda: grader.admin.set_deadline(deadline))
    return deadline
