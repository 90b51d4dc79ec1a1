"""The run's LLM gateway: agents reach their driver model only through it.

It runs outside the sandbox, holds the upstream keys, holds each call's worst case against the run's budget
before forwarding it, meters every answer from the upstream's usage fields and records every call in the
run's gateway folder (see :mod:`.record`). One job a module: :mod:`.routes` (which method a path calls),
:mod:`.limits` (what a call asks for), :mod:`.budget` (reservations and totals), :mod:`.calls` (a call's
record and the run's book of calls), :mod:`.forward` (a call to the upstream), :mod:`.relay` and
:mod:`.streams` (its answer, metered), :mod:`.usage` and :mod:`.prices`,
:mod:`.upstreams` (the keys), :mod:`.agent_env` (what an agent may be given), :mod:`.app` (HTTP) and
:mod:`.process` (the gateway's own process).

The names below are imported when first used, so that what needs only :mod:`.agent_env` (the agents) does not
import the HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autorl.gateway.agent_env import agent_variables, operator_variables, scrub
    from autorl.gateway.app import create_app
    from autorl.gateway.budget import Meter
    from autorl.gateway.config import GatewayConfig
    from autorl.gateway.prices import DEFAULT_PRICES, load_prices
    from autorl.gateway.process import GatewayError, GatewayProcess, new_config, start_gateway
    from autorl.gateway.record import read_calls
    from autorl.gateway.upstreams import SECRET_NAMES, Upstream, upstreams_from_env
    from autorl.gateway.usage import Usage

_WHERE = {
    "agent_variables": "agent_env",
    "operator_variables": "agent_env",
    "scrub": "agent_env",
    "create_app": "app",
    "Meter": "budget",
    "GatewayConfig": "config",
    "DEFAULT_PRICES": "prices",
    "load_prices": "prices",
    "GatewayError": "process",
    "GatewayProcess": "process",
    "new_config": "process",
    "start_gateway": "process",
    "read_calls": "record",
    "SECRET_NAMES": "upstreams",
    "Upstream": "upstreams",
    "upstreams_from_env": "upstreams",
    "Usage": "usage",
}

__all__ = [
    "DEFAULT_PRICES",
    "SECRET_NAMES",
    "GatewayConfig",
    "GatewayError",
    "GatewayProcess",
    "Meter",
    "Upstream",
    "Usage",
    "agent_variables",
    "create_app",
    "load_prices",
    "new_config",
    "operator_variables",
    "read_calls",
    "scrub",
    "start_gateway",
    "upstreams_from_env",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'autorl.gateway' has no attribute {name!r}")
    return getattr(importlib.import_module(f"autorl.gateway.{_WHERE[name]}"), name)
