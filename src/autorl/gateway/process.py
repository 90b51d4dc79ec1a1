"""The gateway as its own process: ``python -m autorl.gateway.process CONFIG.json --port P [--lease-fd FD]``, and
``GatewayProcess``, which the run starts outside the sandbox and stops after the agent. The gateway holds a
lease (:mod:`autorl.procs.service`): it exits when the process that started it dies, however that dies."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import httpx

from autorl.errors import AutorlError
from autorl.gateway.agent_env import agent_variables
from autorl.gateway.app import GatewayConfig, create_app
from autorl.procs.service import ServiceProcess, serve, service_args


class GatewayError(AutorlError):
    """The gateway did not start or did not answer."""


def new_config(record_dir: Path, **options: Any) -> GatewayConfig:
    """A config with fresh tokens: the agent's and the orchestrator's."""
    return GatewayConfig(
        token=f"autorl-llm-{secrets.token_urlsafe(24)}",
        admin_token=secrets.token_urlsafe(32),
        record_dir=str(record_dir),
        **options,
    )


def start_gateway(
    folder: Path,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    prices: Path | str | None = None,
    *,
    server_tools: bool = True,
    decoy_tokens: dict[str, str] | None = None,
) -> GatewayProcess:
    """A gateway in its own process on a free port of 127.0.0.1, recording into ``folder``, for a run's agent or
    an operator's own calls (``autorl smith generate``): the operator's keys stay in it, the budget holds.

    Raises:
        UsageError: a budget that is not positive, a bad price table or upstreams file (one line).
    """
    import os

    from autorl.gateway.budget import check_budget
    from autorl.gateway.prices import load_prices
    from autorl.gateway.upstreams import upstreams_from_env
    from autorl.procs.group import free_port
    from autorl.resources import private_dir

    check_budget(budget_usd, budget_tokens)
    prices = prices or os.environ.get("AUTORL_LLM_PRICES") or None
    load_prices(prices)  # a bad table stops here, in one line
    upstreams_from_env()  # and so does a bad upstreams file
    folder = private_dir(folder)
    config = new_config(
        folder,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        prices_path=str(Path(prices).expanduser().resolve()) if prices else None,
        timeout_s=float(os.environ.get("AUTORL_LLM_TIMEOUT_S", "600")),
        server_tools=server_tools,
        decoy_tokens=dict(decoy_tokens or {}),
    )
    return GatewayProcess(config, folder / "config.json", free_port(), folder / "gateway.log")


class GatewayProcess(ServiceProcess):
    """A run's gateway in its own process (and session) on 127.0.0.1. It inherits this process's
    environment, where the upstream keys are; the agent gets only ``agent_env()``."""

    def __init__(self, config: GatewayConfig, config_path: Path, port: int, log_path: Path) -> None:
        config.save(config_path)
        self.config = config
        super().__init__("autorl.gateway.process", config_path, port, log_path, what="the LLM gateway")
        self._admin = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {config.admin_token}"}, timeout=30, trust_env=False
        )
        self.summary: dict[str, Any] | None = None
        self.error: str | None = None

    def agent_env(self) -> dict[str, str]:
        return agent_variables(self.url, self.config.token)

    def wait_ready(self, timeout: float = 60.0) -> None:
        self.wait_answer(self._answers, timeout, error=GatewayError)

    def _answers(self) -> bool:
        try:
            return self._admin.get("/-/health").status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> dict[str, Any] | None:
        """End the run for the gateway (later calls are refused) and return its totals; None (and the
        reason in ``error``) when it cannot answer: a run is recorded whatever became of its gateway."""
        try:
            resp = self._admin.post("/-/close")
            resp.raise_for_status()
            self.summary = dict(resp.json())
        except (httpx.HTTPError, ValueError, TypeError) as exc:
            self.error = f"the LLM gateway did not close: {type(exc).__name__}: {str(exc)[:200]}"
        return self.summary

    def stop(self) -> None:
        self._admin.close()
        self.end(grace=10)


def main(argv: list[str] | None = None) -> int:
    args = service_args("python -m autorl.gateway.process", "the gateway", argv)
    serve(
        create_app(GatewayConfig.load(args.config)),
        args.port,
        lease_fd=args.lease_fd,
        exit_after_s=10.0,
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
