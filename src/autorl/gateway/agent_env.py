"""What of the operator's an agent may be given: the gateway's variables in place of every key, the host
variables the operator names, and nothing else.

An agent folder is third-party content: it can ask for host variables (``credentials.pass``) but never gets
one by asking. The operator passes a host variable by name (``autorl run --agent-credential NAME``, the study
key ``agent_credentials``) and sets values with ``--agent-env NAME=VALUE``; ``operator_variables`` checks both
before the run starts. ``scrub`` builds the agent's final environment, whatever put a variable there (an
agent plugin's ``environment()`` too): credential variables, keys and the hidden-item secret never pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from autorl.errors import UsageError
from autorl.gateway.upstreams import SECRET_NAMES, key_variables, upstreams_from_env
from autorl.hidden import HIDDEN_SECRET_ENV

#: The built-in ``llm`` agent's own limits: the ``AUTORL_*`` settings an agent may be given.
AGENT_SETTINGS = (
    "AUTORL_LLM_MAX_STEPS",
    "AUTORL_LLM_MAX_TOKENS",
    "AUTORL_LLM_MAX_COST",
    "AUTORL_LLM_PRICE_IN",
    "AUTORL_LLM_PRICE_OUT",
    "AUTORL_LLM_CONTEXT",
    "AUTORL_LLM_SHELL_TIMEOUT",
)
#: The ``AUTORL_*`` variables an agent may have: the contract, the gateway's, and ``AGENT_SETTINGS``. Every
#: other ``AUTORL_*`` variable is the harness's (``AUTORL_HOME``, ``AUTORL_HIDDEN_SECRET``,
#: ``AUTORL_LLM_UPSTREAMS``, ...) and never reaches an agent.
AGENT_AUTORL_NAMES = frozenset(
    {
        "AUTORL_TOKEN",
        "AUTORL_DEADLINE",
        "AUTORL_SEED",
        "AUTORL_PYTHON",
        "AUTORL_AGENT_DIR",
        "AUTORL_LLM_GATEWAY",
        "AUTORL_LLM_TOKEN",
        *AGENT_SETTINGS,
    }
)
#: a value shorter than this is not looked for inside other values (a "key" that short protects nothing)
_MIN_SECRET = 8
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def agent_variables(gateway_url: str, token: str) -> dict[str, str]:
    """The variables an agent gets: every model API's base URL pointing at the gateway, the run's token as
    each API's key."""
    g = gateway_url.rstrip("/")
    return {
        "AUTORL_LLM_GATEWAY": g,
        "AUTORL_LLM_TOKEN": token,
        # OpenAI-compatible clients (the llm agent, codex, opencode, openhands, rdagent/litellm)
        "OPENAI_BASE_URL": f"{g}/openai/v1",
        "OPENAI_API_BASE": f"{g}/openai/v1",
        "OPENAI_API_KEY": token,
        "LLM_BASE_URL": f"{g}/openai/v1",
        "LLM_API_KEY": token,
        # Anthropic clients (claude)
        "ANTHROPIC_BASE_URL": f"{g}/anthropic",
        "ANTHROPIC_API_KEY": token,
        # Gemini clients (gemini-cli reads GOOGLE_GEMINI_BASE_URL)
        "GOOGLE_GEMINI_BASE_URL": f"{g}/gemini",
        "GEMINI_API_KEY": token,
    }


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """What must never appear in an agent's environment: every upstream key, every credential variable's
    value, and the hidden-item secret (each at least ``_MIN_SECRET`` characters)."""
    values = [u.api_key for u in upstreams_from_env(environ).values()]
    values += [environ.get(name, "") for name in SECRET_NAMES]
    values.append(environ.get(HIDDEN_SECRET_ENV, "").strip())
    return sorted({v for v in values if len(v) >= _MIN_SECRET})


def _holds_secret(value: str, secrets: Iterable[str]) -> bool:
    folded = value.casefold()  # the hidden-item secret is hex: its case does not matter
    return any(s.casefold() in folded for s in secrets)


def _harness_name(name: str) -> bool:
    return name.startswith("AUTORL_") and name not in AGENT_AUTORL_NAMES


def scrub(
    env: Mapping[str, str], gateway_url: str, token: str, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``env`` as the agent gets it: no credential variable, no value holding an upstream key or the
    hidden-item secret, no ``AUTORL_*`` variable of the harness's; the gateway's variables in their place.
    ``environ`` (default ``os.environ``) is where the keys and the secret are."""
    secrets = secret_values(os.environ if environ is None else environ)
    out = {
        k: v for k, v in env.items() if k not in SECRET_NAMES and not _harness_name(k) and not _holds_secret(v, secrets)
    }
    out.update(agent_variables(gateway_url, token))
    return out


def operator_variables(
    credentials: Iterable[str], agent_env: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables the operator gives the agent: each credential name with its value from ``environ``
    (default ``os.environ``), then ``agent_env``. A one-line ``UsageError`` for a name or value that must not
    reach an agent: an upstream's key variable, a credential variable, an ``AUTORL_*`` setting of the
    harness's, a value holding an upstream key or the hidden-item secret."""
    env = os.environ if environ is None else environ
    upstreams = upstreams_from_env(env)
    keys = key_variables(upstreams)
    secrets = secret_values(env)
    out: dict[str, str] = {}
    for name in credentials:
        flag = f"--agent-credential {name}"
        if not _NAME.fullmatch(name):
            raise UsageError(f"{flag}: not an environment variable name")
        if name.startswith("AUTORL_"):
            raise UsageError(f"{flag}: AUTORL_* variables are the harness's own settings; an agent never gets them")
        if name not in env:
            raise UsageError(f"{flag}: {name} is not set in this environment")
        out[name] = env[name]
    for name, value in {**out, **agent_env}.items():
        flag = f"--agent-credential {name}" if name in out and name not in agent_env else f"--agent-env {name}"
        if not _NAME.fullmatch(name):
            raise UsageError(f"{flag}: not an environment variable name")
        if name in keys or name in SECRET_NAMES:
            raise UsageError(
                f"{flag}: {name} holds a model API key; keys stay with the run's LLM gateway (the "
                "agent gets the run's token in their place)"
            )
        if _harness_name(name):
            raise UsageError(f"{flag}: {name} is the harness's own setting; an agent never gets it")
        if _holds_secret(value, secrets):
            raise UsageError(
                f"{flag}: its value holds an upstream key or the hidden-item secret; it stays with the harness"
            )
    return {**out, **agent_env}
