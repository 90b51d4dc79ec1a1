"""An httpx client for the grading API, for agents, users and the orchestrator."""

from __future__ import annotations

import os
from typing import Any

import httpx

from autorl.errors import GraderError, UsageError


class GraderClient:
    """``GraderClient()`` reads ``GRADING_SERVER_URL`` and ``AUTORL_TOKEN`` from the environment."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float | None = None) -> None:
        url = url or os.environ.get("GRADING_SERVER_URL")
        if not url:
            raise UsageError("no grader URL: pass one or set GRADING_SERVER_URL")
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("AUTORL_TOKEN", "")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GraderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise GraderError(f"cannot reach the grader at {self.url}: {exc}") from None
        if resp.status_code >= 400:
            try:
                message = resp.json().get("error", resp.text)
            except ValueError:
                message = resp.text
            raise GraderError(f"grader answered {resp.status_code}: {message}", status=resp.status_code)
        return resp.json()

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/health"))

    def time(self) -> dict[str, Any]:
        return dict(self._call("GET", "/time"))

    def submit(self, model_path: str, wait: bool = True) -> dict[str, Any]:
        params = {} if wait else {"wait": "false"}
        return dict(self._call("POST", "/submit", json={"model_path": str(model_path)}, params=params))

    def submissions(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/submissions"))

    def submission(self, submission_id: int) -> dict[str, Any]:
        return dict(self._call("GET", f"/submissions/{submission_id}"))

    def set_baseline(self, score: float) -> dict[str, Any]:
        return dict(self._call("POST", "/set_baseline", json={"score": score}))

    # admin calls (the orchestrator's token)
    def state(self) -> dict[str, Any]:
        return dict(self._call("GET", "/admin/state"))

    def close_run(self) -> dict[str, Any]:
        return dict(self._call("POST", "/admin/close"))

    def set_deadline(self, deadline: float) -> dict[str, Any]:
        return dict(self._call("POST", "/admin/deadline", json={"deadline": deadline}))

    def baseline(self, timeout: float = 3600) -> dict[str, Any]:
        return dict(self._call("GET", "/admin/baseline", params={"timeout": timeout}))

    def evaluate_test(self, submission_id: int | None = None) -> dict[str, Any]:
        body = {} if submission_id is None else {"submission_id": submission_id}
        return dict(self._call("POST", "/admin/test", json=body))
