"""An httpx client for the grading API, for agents, users and the orchestrator.

Each call returns the grader's answer as the record its route sends (:mod:`autorl.grader.schema`): a JSON object
(or a list of them) taken at the grader's word, as typed records are; nothing here checks their fields.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypedDict, cast

import httpx

from autorl.errors import GraderError, UsageError

if TYPE_CHECKING:
    from autorl.grader.schema import BaselineRecord, GraderState, SubmissionRecord, TestRecord, TimeInfo


class Health(TypedDict):
    """``GET /health``: the grader is up, its task, the time left and whether it still takes submissions."""

    status: str
    task: str
    remaining_s: float | None
    closed: bool


class BaselineSet(TypedDict):
    """``POST /set_baseline``: the dev baseline's score as set."""

    baseline_score: float


class Closed(TypedDict):
    """``POST /admin/close``: the run no longer takes submissions."""

    closed: bool


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
        """The grader's JSON answer (each method below names its record), or :class:`GraderError`."""
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

    def _object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """A call whose answer is a JSON object (a copy of it); each method below names its record."""
        return dict(self._call(method, path, **kwargs))

    def health(self) -> Health:
        return cast("Health", self._object("GET", "/health"))

    def time(self) -> TimeInfo:
        return cast("TimeInfo", self._object("GET", "/time"))

    def submit(self, model_path: str, wait: bool = True) -> SubmissionRecord:
        params = {} if wait else {"wait": "false"}
        answer = self._object("POST", "/submit", json={"model_path": str(model_path)}, params=params)
        return cast("SubmissionRecord", answer)

    def submissions(self) -> list[SubmissionRecord]:
        return cast("list[SubmissionRecord]", list(self._call("GET", "/submissions")))

    def submission(self, submission_id: int) -> SubmissionRecord:
        return cast("SubmissionRecord", self._object("GET", f"/submissions/{submission_id}"))

    def set_baseline(self, score: float) -> BaselineSet:
        return cast("BaselineSet", self._object("POST", "/set_baseline", json={"score": score}))

    # admin calls (the orchestrator's token)
    def state(self) -> GraderState:
        return cast("GraderState", self._object("GET", "/admin/state"))

    def close_run(self) -> Closed:
        return cast("Closed", self._object("POST", "/admin/close"))

    def set_deadline(self, deadline: float) -> TimeInfo:
        return cast("TimeInfo", self._object("POST", "/admin/deadline", json={"deadline": deadline}))

    def baseline(self, timeout: float = 3600) -> BaselineRecord:
        return cast("BaselineRecord", self._object("GET", "/admin/baseline", params={"timeout": timeout}))

    def evaluate_test(self, submission_id: int | None = None) -> TestRecord:
        body = {} if submission_id is None else {"submission_id": submission_id}
        return cast("TestRecord", self._object("POST", "/admin/test", json=body))
