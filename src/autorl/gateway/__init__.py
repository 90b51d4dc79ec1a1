"""The run's LLM gateway: agents reach their driver model only through it.

It runs outside the sandbox, holds the upstream keys, meters every call from the upstream's usage fields,
enforces the run's budget and records every call in the run's gateway folder (see :mod:`.record`).
"""

from __future__ import annotations

from autorl.gateway.app import GatewayConfig, create_app
from autorl.gateway.metering import DEFAULT_PRICES, Meter, Usage, load_prices
from autorl.gateway.process import GatewayError, GatewayProcess, new_config
from autorl.gateway.record import read_calls
from autorl.gateway.upstreams import SECRET_NAMES, Upstream, agent_variables, scrub, upstreams_from_env

__all__ = ["DEFAULT_PRICES", "SECRET_NAMES", "GatewayConfig", "GatewayError", "GatewayProcess", "Meter", "Upstream",
           "Usage", "agent_variables", "create_app", "load_prices", "new_config", "read_calls", "scrub",
           "upstreams_from_env"]
