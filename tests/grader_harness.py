"""A real grader process on 127.0.0.1 for tests, over the echo benchmark and the scripted backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from autorl.grader.server import free_port
from autorl.grader.service import GraderConfig


@dataclass
class RunningGrader:
    config: GraderConfig
    config_path: Path
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def workspace(self) -> Path:
        return Path(self.config.workspace)

    @property
    def output(self) -> Path:
        return Path(self.config.output_dir)

    def client(self, token: str | None = None, **kw: Any) -> httpx.Client:
        token = self.config.agent_token if token is None else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, **kw)

    def admin(self) -> httpx.Client:
        return self.client(self.config.admin_token)

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_grader(config: GraderConfig, port: int | None = None) -> RunningGrader:
    port = port or free_port()
    store = Path(config.store_dir)
    store.mkdir(parents=True, exist_ok=True)
    config_path = store / "config.json"
    config.save(config_path)
    log = store / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autorl.grader.server", str(config_path), "--port", str(port)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    running = RunningGrader(config, config_path, port, proc, log)
    end = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{running.url}/health", timeout=2)
            return running
        except httpx.HTTPError:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"grader did not start:\n{log.read_text()}") from None
            time.sleep(0.1)


def make_config(tmp_path: Path, **overrides: Any) -> GraderConfig:
    ws = tmp_path / "ws"
    (ws / "output").mkdir(parents=True, exist_ok=True)
    (ws / "code").mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "task": "echo",
        "workspace": str(ws),
        "output_dir": str(ws / "output"),
        "store_dir": str(tmp_path / "store"),
        "hidden_dir": str(tmp_path / "hidden"),
        "backend": "scripted",
        "eval_timeout": 60.0,
    }
    values.update(overrides)
    return GraderConfig(**values)


def wait_done(client: httpx.Client, sid: int, timeout: float = 120) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        rec = client.get(f"/submissions/{sid}").json()
        if rec["status"] in ("done", "failed"):
            return dict(rec)
        if time.monotonic() > end:
            raise TimeoutError(f"submission {sid} still {rec['status']}")
        time.sleep(0.1)
