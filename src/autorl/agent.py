"""The agent contract: given the run context, a command to start in the workspace."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from autorl.benchmark import Benchmark


@dataclass(frozen=True)
class AgentContext:
    """What an agent is given. ``env`` is the whole environment contract (DESIGN section 4): the variables
    :meth:`contract` builds from the fields, on top of the run's extras passed as ``env`` (``AUTORL_SEED``,
    ``AUTORL_PYTHON``, the agent's GPUs)."""

    task: str
    base_model: str
    workspace: Path
    model_path: Path
    data_path: Path
    output_dir: Path
    grader_url: str
    token: str
    deadline: float
    run_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # built here only: the contract's variables always say what the fields say
        object.__setattr__(self, "env", {**self.env, **self.contract()})

    def contract(self) -> dict[str, str]:
        """The contract's variables (names from the reference harness, kept for compatibility)."""
        return {
            "TASK": self.task,
            "BASE_MODEL": self.base_model,
            "WORKSPACE": str(self.workspace),
            "MODEL_PATH": str(self.model_path),
            "DATA_PATH": str(self.data_path),
            "OUTPUT_DIR": str(self.output_dir),
            "GRADING_SERVER_URL": self.grader_url,
            "AUTORL_TOKEN": self.token,
            "AUTORL_DEADLINE": f"{self.deadline:.3f}",
        }


class Agent(ABC):
    """Base class of agents. ``command`` is started with cwd = workspace in its own process group."""

    name: ClassVar[str]
    description: ClassVar[str] = ""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options: dict[str, Any] = dict(options or {})

    @abstractmethod
    def command(self, ctx: AgentContext) -> list[str]:
        """The argv to run."""

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        """Variables added to the contract for this agent (its config's env_vars, credentials it needs)."""
        return {}

    def ready(self) -> tuple[bool, str]:
        """Whether the agent can run here, and if not what to install or set."""
        return True, "ready"

    def sandbox_paths(self) -> list[Path]:
        """Host paths the agent's command needs to read inside the sandbox (its own files)."""
        return []

    def check_task(self, benchmark: Benchmark) -> None:
        """Raise ``UsageError`` (one line) when the agent cannot work on ``benchmark``; called before the run starts."""

    def preflight(self) -> None:
        """Raise ``UsageError`` (one line, naming what to install) when the agent cannot start at all.

        Called by ``autorl run`` before anything is prepared. Missing credentials are not fatal here: a CLI
        may be logged in by other means; ``ready`` reports them.
        """
