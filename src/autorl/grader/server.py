"""The grader as its own process: ``python -m autorl.grader.server CONFIG.json --port P [--lease-fd FD]``
(uvicorn on loopback).

This is the grader's entry point, where names may be resolved: it hands :func:`autorl.grader.app.create_app` the
plugin and benchmark listings from the registry, so that the grader package below never imports it. With a lease
(:mod:`autorl.lease`) the grader ends with its orchestrator: when the lease breaks it closes the run, records
when it lost its orchestrator in its store, abandons the evaluation in flight (the store queues it again for the
grader that recovers the run) and exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
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


def serve(config: GraderConfig, port: int, host: str = "127.0.0.1", *, lease_fd: int | None = None) -> None:
    """Serve until interrupted (or, given ``lease_fd``, until the lease breaks). Binds to loopback only: the agent
    reaches it through its URL."""
    import uvicorn

    from autorl.grader.app import create_app

    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("the grader serves on loopback only")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    grader = Grader(config)
    app = create_app(grader, plugins=plugin_listing, benchmarks=benchmark_listing)
    if lease_fd is not None:
        from autorl.lease import watch_lease

        watch_lease(lease_fd, lambda: orchestrator_lost(grader))
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=True, timeout_graceful_shutdown=5)


#: how long a grader that lost its orchestrator may take to shut down before it exits regardless
_LOST_EXIT_S = 30.0


def orchestrator_lost(grader: Grader) -> None:
    """The lease broke: no new submissions, the loss recorded in the store, then a shutdown (the app's lifespan
    stops the grader, which kills the evaluation in flight); past :data:`_LOST_EXIT_S` the process just exits."""
    from autorl.lease import LOST_AT_KEY

    logging.getLogger("autorl.grader").warning("the orchestrator is gone: closing the run and exiting")
    try:
        if grader.store.get_meta(LOST_AT_KEY) is None:
            grader.store.set_meta(LOST_AT_KEY, time.time())
        grader.close()
    finally:
        timer = threading.Timer(_LOST_EXIT_S, os._exit, (3,))
        timer.daemon = True
        timer.start()
        os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorl.grader.server")
    parser.add_argument("config", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lease-fd", type=int, default=None,
                        help="the read end of the orchestrator's lease: the grader ends when it breaks")
    args = parser.parse_args(argv)
    serve(GraderConfig.load(args.config), args.port, lease_fd=args.lease_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
