"""A real grader process on 127.0.0.1 for tests, over the echo benchmark and the scripted backend."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from autorl.grader.config import GraderConfig
from autorl.grader.process import GraderProcess
from autorl.procs.group import free_port


class RunningGrader(GraderProcess):
    """The real grader process, plus helpers for tests."""

    def __init__(self, config: GraderConfig, port: int) -> None:
        store = Path(config.store_dir)
        store.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.config_path = store / "config.json"
        self.port = port
        super().__init__(config, self.config_path, port, store / "server.log")

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

    def admin_http(self) -> httpx.Client:
        return self.client(self.config.admin_token)


def start_grader(config: GraderConfig, port: int | None = None) -> RunningGrader:
    grader = RunningGrader(config, port or free_port())
    grader.wait_ready(60)
    return grader


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
