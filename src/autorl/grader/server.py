"""The grader as its own process: ``python -m autorl.grader.server CONFIG.json --port P`` (uvicorn on loopback).

This is the grader's entry point, where names may be resolved: it hands :func:`autorl.grader.app.create_app` the
plugin and benchmark listings from the registry, so that the grader package below never imports it.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path
from typing import Any

from autorl.grader.config import GraderConfig
from autorl.grader.core import Grader


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plugin_listing() -> list[dict[str, Any]]:
    """What ``GET /-/plugins`` lists: each installed plugin and what it registers."""
    from autorl.registry import plugin_summary

    return plugin_summary()


def benchmark_listing() -> list[dict[str, Any]]:
    """What ``GET /-/benchmarks`` lists: each installed benchmark with its distribution and version."""
    from autorl.registry import get_benchmarks

    return [{"name": r.name, "distribution": r.distribution, "version": getattr(r.cls, "version", "?")}
            for r in get_benchmarks().values()]


def serve(config: GraderConfig, port: int, host: str = "127.0.0.1") -> None:
    """Serve until interrupted. Binds to loopback only: the agent reaches it through its URL."""
    import uvicorn

    from autorl.grader.app import create_app

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("the grader serves on loopback only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    app = create_app(Grader(config), plugins=plugin_listing, benchmarks=benchmark_listing)
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=True, timeout_graceful_shutdown=5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorl.grader.server")
    parser.add_argument("config", type=Path)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    serve(GraderConfig.load(args.config), args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
