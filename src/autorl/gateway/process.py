"""The gateway as its own process: ``python -m autorl.gateway.process CONFIG.json --port P [--lease-fd FD]``, and
``GatewayProcess``, which the run starts outside the sandbox and stops after the agent. The gateway holds a
lease (:mod:`autorl.lease`): it exits when the process that started it dies, however that dies."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from autorl.errors import AutorlError
from autorl.gateway.agent_env import agent_variables
from autorl.gateway.app import GatewayConfig
from autorl.lease import Lease


class GatewayError(AutorlError):
    """The gateway did not start or did not answer."""


def new_config(record_dir: Path, **options: Any) -> GatewayConfig:
    """A config with fresh tokens: the agent's and the orchestrator's."""
    return GatewayConfig(token=f"autorl-llm-{secrets.token_urlsafe(24)}", admin_token=secrets.token_urlsafe(32),
                         record_dir=str(record_dir), **options)


class GatewayProcess:
    """A run's gateway in its own process (and session) on 127.0.0.1. It inherits this process's
    environment, where the upstream keys are; the agent gets only ``agent_env()``."""

    def __init__(self, config: GatewayConfig, config_path: Path, port: int, log_path: Path) -> None:
        config.save(config_path)
        self.config = config
        self.url = f"http://127.0.0.1:{port}"
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._log = os.fdopen(fd, "ab")
        self._lease = Lease()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autorl.gateway.process", str(config_path), "--port", str(port),
                 "--lease-fd", str(self._lease.child_fd)],
                stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                pass_fds=(self._lease.child_fd,))
        finally:
            self._lease.handed_over()
        self._admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {config.admin_token}"},
                                   timeout=30, trust_env=False)
        self.summary: dict[str, Any] | None = None
        self.error: str | None = None

    def agent_env(self) -> dict[str, str]:
        return agent_variables(self.url, self.config.token)

    def wait_ready(self, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise GatewayError(f"the LLM gateway exited with code {self.proc.returncode}; see {self._log.name}")
            try:
                if self._admin.get("/-/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise GatewayError(f"the LLM gateway did not answer within {timeout:.0f} s; see {self._log.name}")

    def close(self) -> dict[str, Any] | None:
        """End the run for the gateway (later calls are refused) and return its totals; None (and the
        reason in ``error``) when it cannot answer: a run is recorded whatever became of its gateway."""
        try:
            resp = self._admin.post("/-/close")
            resp.raise_for_status()
            self.summary = dict(resp.json())
        except (httpx.HTTPError, ValueError, TypeError) as exc:
            self.error = f"the LLM gateway did not close: {type(exc).__name__}: {str(exc)[:200]}"
        return self.summary

    def stop(self) -> None:
        self._admin.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._lease.release()
        self._log.close()


def _orchestrator_lost() -> None:
    """The lease broke: uvicorn's graceful shutdown, and an exit regardless a few seconds later."""
    import threading

    timer = threading.Timer(10.0, os._exit, (3,))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorl.gateway.process")
    parser.add_argument("config", type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lease-fd", type=int, default=None,
                        help="the read end of the orchestrator's lease: the gateway ends when it breaks")
    args = parser.parse_args(argv)
    import uvicorn

    from autorl.gateway.app import create_app
    from autorl.lease import watch_lease

    app = create_app(GatewayConfig.load(args.config))
    if args.lease_fd is not None:
        watch_lease(args.lease_fd, _orchestrator_lost)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", timeout_graceful_shutdown=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
