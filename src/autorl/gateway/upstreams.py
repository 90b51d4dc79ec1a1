"""The upstream model APIs the gateway forwards to, and the keys it holds for them.

By default the upstreams are what the operator already has set for these tools: ``OPENAI_API_KEY`` +
``OPENAI_BASE_URL``/``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``) +
``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``) + ``GOOGLE_GEMINI_BASE_URL``. A family is
configured when its key or its base URL is set. ``AUTORL_LLM_UPSTREAMS`` may name a YAML/JSON file that
overrides them per family::

    openai: {base_url: "https://example.org/v1", api_key_env: MY_KEY}
    anthropic: {base_url: "https://api.anthropic.com", api_key_env: ANTHROPIC_API_KEY}
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autorl.errors import UsageError

FAMILIES = ("openai", "anthropic", "gemini")
_DEFAULT_BASE = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
_KEY_VARS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
_BASE_VARS = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
    "anthropic": ("ANTHROPIC_BASE_URL",),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "GEMINI_BASE_URL"),
}

#: Variables that hold credentials for a model API or a cloud: never in an agent's environment when the
#: gateway runs (the agent gets the gateway's token under the names its tools read instead).
SECRET_NAMES = (
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "LLM_API_KEY",
    "LITELLM_PROXY_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "TOGETHER_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
)


@dataclass(frozen=True)
class Upstream:
    """One configured model API: where it is and the key the gateway sends (never shown to the agent)."""

    family: str
    base_url: str
    api_key: str = ""
    #: Anthropic's ``ANTHROPIC_AUTH_TOKEN`` is sent as a bearer token, its API key as ``x-api-key``
    bearer: bool = False
    #: the variable the key was read from
    key_env: str = ""

    def describe(self) -> dict[str, str]:
        """What may be recorded: the URL, never the key."""
        return {"family": self.family, "base_url": self.base_url, "key": "set" if self.api_key else "none"}


def _from_file(path: Path, environ: Mapping[str, str]) -> dict[str, Upstream]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"AUTORL_LLM_UPSTREAMS={path}: cannot read it: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or set(data) - set(FAMILIES):
        raise UsageError(
            f"AUTORL_LLM_UPSTREAMS={path}: must map some of {', '.join(FAMILIES)} to {{base_url, api_key_env}}"
        )
    out = {}
    for family, entry in data.items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("base_url", ""), str)
            or not isinstance(entry.get("api_key_env", ""), str)
        ):
            raise UsageError(f"AUTORL_LLM_UPSTREAMS={path}: {family} needs base_url and api_key_env strings")
        key_env = entry.get("api_key_env") or _KEY_VARS[family][0]
        out[family] = Upstream(
            family,
            str(entry.get("base_url") or _DEFAULT_BASE[family]).rstrip("/"),
            environ.get(key_env, ""),
            bearer=key_env == "ANTHROPIC_AUTH_TOKEN",
            key_env=key_env,
        )
    return out


def upstreams_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Upstream]:
    """The upstreams configured by the operator's environment (and ``AUTORL_LLM_UPSTREAMS``), by family."""
    env = os.environ if environ is None else environ
    out: dict[str, Upstream] = {}
    for family in FAMILIES:
        key_var = next((v for v in _KEY_VARS[family] if env.get(v)), None)
        base = next((env[v] for v in _BASE_VARS[family] if env.get(v)), None)
        if key_var is None and base is None:
            continue
        out[family] = Upstream(
            family,
            (base or _DEFAULT_BASE[family]).rstrip("/"),
            env.get(key_var, "") if key_var else "",
            bearer=key_var == "ANTHROPIC_AUTH_TOKEN",
            key_env=key_var or "",
        )
    if env.get("AUTORL_LLM_UPSTREAMS"):
        out.update(_from_file(Path(env["AUTORL_LLM_UPSTREAMS"]).expanduser(), env))
    return out


def setting_names() -> set[str]:
    """Every variable that configures an upstream: the key and base-URL names of each family, and
    ``AUTORL_LLM_UPSTREAMS``."""
    return {v for family in FAMILIES for v in (*_KEY_VARS[family], *_BASE_VARS[family])} | {"AUTORL_LLM_UPSTREAMS"}


def key_variables(upstreams: Mapping[str, Upstream]) -> set[str]:
    """Every variable an upstream may take its key from: the built-in names, and those ``upstreams`` use."""
    names = {v for family in FAMILIES for v in _KEY_VARS[family]}
    return names | {u.key_env for u in upstreams.values() if u.key_env}
