"""The registry's former path, kept for plugins that import it: :mod:`autorl.plugins.registry` is its home."""

from __future__ import annotations

from autorl.plugins.registry import (
    KINDS,
    Kind,
    Registration,
    agent_summary,
    backend_summary,
    benchmark_summary,
    default_backend,
    get_agent,
    get_agents,
    get_backend,
    get_backends,
    get_benchmark,
    get_benchmarks,
    plugin_summary,
    registrations,
    resolve_agent,
    resolve_task,
)

__all__ = [
    "KINDS",
    "Kind",
    "Registration",
    "agent_summary",
    "backend_summary",
    "benchmark_summary",
    "default_backend",
    "get_agent",
    "get_agents",
    "get_backend",
    "get_backends",
    "get_benchmark",
    "get_benchmarks",
    "plugin_summary",
    "registrations",
    "resolve_agent",
    "resolve_task",
]
