"""One call's record as it is built, and the run's book of calls: the meter that settles each call's
reservation, the record file every call is written to, and the responses-API answers a later call may
continue. Both sides of a call use it: :mod:`.forward` (before the upstream) and :mod:`.relay` (its answer)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from starlette.responses import JSONResponse

from autorl.gateway.budget import Meter, Reservation
from autorl.gateway.record import CallLog
from autorl.gateway.routes import ApiRoute
from autorl.gateway.usage import COUNTED, Usage


def error_response(
    family: str, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """A refusal in the family's error shape."""
    if family == "gemini":
        body: dict[str, Any] = {"error": {"code": status, "message": message, "status": kind.upper()}}
    else:  # the shape OpenAI and Anthropic clients both read
        body = {"type": "error", "error": {"type": kind, "code": kind, "message": message}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


class Call:
    """One call's record as it is built, and its reservation."""

    def __init__(self, route: ApiRoute, http_method: str) -> None:
        self.route = route
        self.started = time.monotonic()
        self.record: dict[str, Any] = {
            "id": uuid.uuid4().hex[:16],
            "time": time.time(),
            "family": route.family,
            "path": route.upstream_path,
            "method": http_method,
        }
        self.reservation: Reservation | None = None
        self.estimate = 0

    @property
    def model(self) -> str:
        return str(self.record.get("model", ""))


class CallBook:
    """The run's meter and record of calls, and the responses-API answers given through it."""

    def __init__(self, meter: Meter, log: CallLog) -> None:
        self.meter = meter
        self.log = log
        #: responses-API answers of this run: id -> their tokens (the context a continuation brings along)
        self.responses: dict[str, int] = {}

    def write(self, call: Call, **fields: Any) -> None:
        call.record.update(fields)
        call.record["latency_s"] = round(time.monotonic() - call.started, 6)
        self.log.write(call.record)

    def account(self, call: Call, usage: Usage | None, *, ok: bool, error: str | None, response: Any) -> None:
        """Settle the call's reservation to ``usage`` (None: nothing billed) and record it."""
        if call.reservation is not None:
            usage = call.reservation.bounded(usage)
            cost = self.meter.settle(call.reservation, usage, failed=not ok)
        elif usage is not None:  # a free method whose answer carried usage: it is charged all the same
            cost = self.meter.add(call.model, usage, failed=not ok)
        else:
            cost, self.meter.failed = None, self.meter.failed + (not ok)
        self.write(
            call,
            outcome="ok" if ok else "failed",
            error=error,
            usage=None if usage is None else asdict(usage),
            cost_usd=cost,
            response=response,
        )

    def counted_prompt(self, call: Call) -> Usage:
        """The prompt as counted: what a call is charged when it was sent and nothing came back."""
        return Usage(self.meter.prompt_tokens(call.model, call.estimate), 0, 0, COUNTED)

    def refuse(
        self, call: Call, status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
    ) -> JSONResponse:
        self.meter.refused += 1
        self.write(call, status=status, outcome="refused", error=message, usage=None, cost_usd=None)
        return error_response(call.route.family, status, kind, message, headers)

    def failed(self, call: Call, usage: Usage | None, status: int, kind: str, message: str) -> JSONResponse:
        call.record["status"] = status
        self.account(call, usage, ok=False, error=message, response=None)
        return error_response(call.route.family, status, kind, message)


__all__ = ["Call", "CallBook", "error_response"]
