"""The grader as its own process: ``python -m autorl.grader.server CONFIG.json --port P [--lease-fd FD]``
(uvicorn on loopback).

This is the grader's entry point, where names may be resolved: it hands :func:`autorl.grader.app.create_app` the
plugin and benchmark listings from the registry, so that the grader package below never imports it. With a lease
(:mod:`autorl.procs.lease`) the grader ends with its orchestrator: when the lease breaks it closes the run, records
when it lost its orchestrator in its store, abandons the evaluation in flight (the store queues it again for the
grader that recovers the run) and exits.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from autorl.grader.config import GraderConfig
from autorl.grader.core import Grader
from autorl.procs import service
from autorl.procs.lease import LOST_AT_KEY


def plugin_listing() -> list[dict[str, Any]]:
    """What ``GET /-/plugins`` lists: each installed plugin and what it registers."""
    from autorl.plugins.registry import plugin_summary

    return plugin_summary()


def benchmark_listing() -> list[dict[str, Any]]:
    """What ``GET /-/benchmarks`` lists: each installed benchmark with its distribution and version."""
    from autorl.plugins.registry import get_benchmarks

    return [
        {"name": r.name, "distribution": r.distribution, "version": getattr(r.cls, "version", "?")}
        for r in get_benchmarks().values()
    ]


def serve(config: GraderConfig, port: int, *, lease_fd: int | None = None) -> None:
    """Serve until interrupted (or, given ``lease_fd``, until the lease breaks). Binds to loopback only: the agent
    reaches it through its URL."""
    from autorl.grader.app import create_app

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    grader = Grader(config)
    app = create_app(grader, plugins=plugin_listing, benchmarks=benchmark_listing)
    service.serve(
        app,
        port,
        lease_fd=lease_fd,
        exit_after_s=_LOST_EXIT_S,
        on_lost=lambda: orchestrator_lost(grader),
        log_level="info",
        access_log=True,
        timeout_graceful_shutdown=5,
    )


#: how long a grader that lost its orchestrator may take to shut down before it exits regardless
_LOST_EXIT_S = 30.0


def orchestrator_lost(grader: Grader) -> None:
    """The lease broke: no new submissions and the loss recorded in the store; then (:func:`autorl.procs.service.serve`)
    a shutdown, in which the app's lifespan stops the grader and kills the evaluation in flight, and past
    :data:`_LOST_EXIT_S` an exit regardless."""
    logging.getLogger("autorl.grader").warning("the orchestrator is gone: closing the run and exiting")
    if grader.store.get_meta(LOST_AT_KEY) is None:
        grader.store.set_meta(LOST_AT_KEY, time.time())
    grader.close()


def main(argv: list[str] | None = None) -> int:
    args = service.service_args("python -m autorl.grader.server", "the grader", argv)
    serve(GraderConfig.load(args.config), args.port, lease_fd=args.lease_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
