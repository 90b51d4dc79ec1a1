"""What one run's gateway needs, saved as JSON for its process. Keys are not in it: the gateway reads them
from its own environment (see :mod:`autorl.gateway.upstreams`)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class GatewayConfig:
    """The run's tokens, record folder, budget and limits."""

    token: str
    admin_token: str
    record_dir: str
    budget_tokens: int | None = None
    budget_usd: float | None = None
    prices_path: str | None = None
    #: seconds without a byte from the upstream before a call fails (504, or a cut stream)
    timeout_s: float = 600.0
    connect_timeout_s: float = 30.0
    #: each family's upstream; None: from the environment
    upstreams: dict[str, dict[str, Any]] | None = field(default=None)
    #: with a budget: the output limit written into a call that sets none
    default_max_output: int = 16384
    #: with a budget: a call that could be given fewer output tokens than this is refused
    min_output: int = 64
    #: whether calls may use the tools an upstream runs itself (web search, fetch, code execution: see
    #: :mod:`.tools`); off for an agent without a network
    server_tools: bool = True
    #: the run's decoy tokens (token -> decoy name): refused as any wrong token, and noted wherever in a request
    #: they appear (autorl.decoys.DecoyTokens)
    decoy_tokens: dict[str, str] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(asdict(self), fh)

    @classmethod
    def load(cls, path: Path) -> GatewayConfig:
        return cls(**json.loads(Path(path).read_text()))
