"""Tools an upstream runs on its own machines (web search, URL fetch, code execution, MCP connectors, file
search, grounding): what a call's body asks for of them.

They reach the network from the upstream's side, so a run whose agent has no network (``--network off``)
would have one through them: its gateway refuses such a call (400 ``server_tool_refused``). Tools the agent's
own process runs (function declarations, Anthropic's bash / text editor / computer tools, OpenAI's custom and
local shell tools) are the agent's and pass.
"""

from __future__ import annotations

from typing import Any

from autorl.gateway.routes import GENERATE, ApiRoute

#: OpenAI and Anthropic tool ``type`` prefixes that the upstream runs itself
_SERVER_TYPES = (
    "web_search",
    "web_fetch",
    "file_search",
    "code_interpreter",
    "code_execution",
    "mcp",
    "image_generation",
)
#: Gemini tool entries the agent runs (every other entry is Google's: search, URL context, code execution...)
_GEMINI_CLIENT = {"functionDeclarations", "function_declarations"}
#: body parameters that switch a server tool on without a tools entry
_SERVER_PARAMS = {"openai": ("web_search_options",), "anthropic": ("mcp_servers",), "gemini": ()}


def _tool_names(family: str, tools: Any) -> list[str]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if family == "gemini":
            names += [str(k) for k in tool if k not in _GEMINI_CLIENT]
            continue
        kind = tool.get("type")
        if isinstance(kind, str) and kind.startswith(_SERVER_TYPES):
            names.append(kind)
    return names


def server_tools(route: ApiRoute, payload: dict[str, Any] | None) -> list[str]:
    """The server-side tools a generate call's body asks for (empty for any other call)."""
    if payload is None or route.kind != GENERATE:
        return []
    names = [p for p in _SERVER_PARAMS[route.family] if payload.get(p) is not None]
    names += _tool_names(route.family, payload.get("tools"))
    return sorted(set(names))


__all__ = ["server_tools"]
