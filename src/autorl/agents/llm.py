"""The built-in ``llm`` agent: any OpenAI-compatible model driving a tool loop (see ``llm_loop``)."""

from __future__ import annotations

import os
import sys
from typing import ClassVar

from autorl.agent import Agent, AgentContext
from autorl.gateway.agent_env import AGENT_SETTINGS

#: passed on from the caller's environment; the API's base URL and key are the run's LLM gateway's
#: (``autorl run`` sets OPENAI_API_BASE and OPENAI_API_KEY to it; the operator's key stays outside)
CREDENTIALS = ("CHAT_MODEL",)
LIMITS = AGENT_SETTINGS


class LLMAgent(Agent):
    """A large model as the ML engineer: shell, files, time and submit tools over chat completions."""

    name = "llm"
    description: ClassVar[str] = "an OpenAI-compatible model (OPENAI_API_BASE, CHAT_MODEL) driving a tool loop"

    def command(self, ctx: AgentContext) -> list[str]:
        return [sys.executable, "-m", "autorl.agents.llm_loop"]

    def environment(self, ctx: AgentContext) -> dict[str, str]:
        # the model's credentials and limits are passed on explicitly; nothing else of the caller's
        env = {k: os.environ[k] for k in (*CREDENTIALS, *LIMITS) if k in os.environ}
        env.update({k: str(v) for k, v in self.options.get("env", {}).items()})
        return env

    def ready(self) -> tuple[bool, str]:
        if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_API_BASE"):
            return True, f"model {os.environ.get('CHAT_MODEL', 'gpt-4o')}"
        return False, "set OPENAI_API_KEY (and OPENAI_API_BASE, CHAT_MODEL for other providers)"
