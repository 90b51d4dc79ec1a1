"""The dashboard's routes: HTML pages, their JSON, and the figures as SVG.

- ``/``: runs (filters ``task agent model status since until``, ``sort`` + ``order``); ``/fragment/runs`` its rows
- ``/runs/{id}``: one run (timeline, numbers, metadata, items, logs, trajectory); live runs update themselves
- ``/compare?task=``: agents side by side on a task (mean held-out test improvement, failed runs counted)
- ``/api/runs``, ``/api/runs/{id}``, ``/api/runs/{id}/timeline``, ``/api/runs/{id}/items`` (``split page
  flipped submission``), ``/api/compare``, ``/api/live``: JSON
- ``/runs/{id}/timeline.svg``, ``/compare.svg``: the figures (``?download=1`` to save them)
- ``/sweeps``, ``/sweeps/{name}``, ``/api/sweeps``, ``/api/sweeps/{name}``: the studies (:mod:`autorl.ui.sweep`)
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

import autorl.record.charts as charts
import autorl.ui.data as data
import autorl.ui.items as items
import autorl.ui.pages as pages
import autorl.ui.sweep as sweep
import autorl.ui.trajectory as trajectory
from autorl.record.aggregate import AgentComparison
from autorl.record.ledger import Ledger
from autorl.ui.shell import not_found

#: names under which a dashboard on a loopback address is reached
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _host_of(header: str) -> tuple[str, int | None] | None:
    """``host[:port]`` split, the host lowercased; None when malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        host, rest = header[: end + 1], header[end + 1 :]
    else:
        host, _, port_text = header.partition(":")
        rest = ":" + port_text if ":" in header else ""
    if not host:
        return None
    if not rest:
        return host, None
    if not rest.startswith(":") or not rest[1:].isdigit():
        return None
    return host, int(rest[1:])


class HostCheck:
    """Refuses requests whose Host header does not name this server (DNS rebinding).

    A page from any web site can make the browser resolve its own name to 127.0.0.1 and read the dashboard
    as same-origin; the browser still sends that site's name in ``Host``, so only the loopback names and the
    ``--host`` address, each with the port served, are answered. Missing or malformed: 400; other: 421.
    """

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.allowed = {
            h.lower() if not (":" in h and not h.startswith("[")) else f"[{h.lower()}]" for h in allowed_hosts
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = [v for k, v in scope.get("headers", []) if k == b"host"]
        parsed = _host_of(headers[0].decode("latin-1")) if len(headers) == 1 else None
        server = scope.get("server")
        served_port = server[1] if server and len(server) > 1 else None
        if parsed is None:
            response: Response = PlainTextResponse("a Host header naming this server is required", status_code=400)
        elif parsed[0] not in self.allowed or (parsed[1] or 80) != (served_port or parsed[1] or 80):
            response = PlainTextResponse("this dashboard does not answer for that host name", status_code=421)
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


def _security_headers(response: Response, nonce: str | None = None) -> Response:
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; script-src {script}; style-src 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def create_app(db_path: Path, *, hosts: Iterable[str] = ()) -> ASGIApp:
    """The dashboard over the ledger at ``db_path`` (read at each request, so new runs appear).

    ``hosts``: names the dashboard answers for besides the loopback ones (``autorl ui --host`` passes its
    address); any other ``Host`` header is refused.
    """

    def ledger() -> Ledger:
        return Ledger(db_path)

    def rows(params: dict[str, str]) -> tuple[list[data.TableRow], list[data.TableRow]]:
        led = ledger()
        try:
            everything = data.all_rows(led)
        finally:
            led.close()
        return everything, data.filter_rows(everything, params)

    def detail(run_id: str) -> data.RunDetail | None:
        led = ledger()
        try:
            return data.run_detail(led, run_id)
        finally:
            led.close()

    def hidden_items(d: data.RunDetail) -> str | None:
        led = ledger()
        try:
            return items.withheld(d["row"].get("task"), led.live())
        finally:
            led.close()

    def svg(body: str, request: Request, name: str) -> Response:
        headers = {"Cache-Control": "no-store"}
        if request.query_params.get("download"):
            headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return _security_headers(Response(body, media_type="image/svg+xml", headers=headers))

    def html(render: Any, *args: Any, status_code: int = 200, **kwargs: Any) -> Response:
        nonce = secrets.token_urlsafe(12)
        return _security_headers(HTMLResponse(render(*args, nonce=nonce, **kwargs), status_code=status_code), nonce)

    def json_response(content: Any, status_code: int = 200) -> Response:
        return _security_headers(JSONResponse(content, status_code=status_code))

    def params_of(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.query_params.items() if v}

    def runs_html(request: Request) -> Response:
        params = params_of(request)
        everything, shown = rows(params)
        return html(pages.runs_page, shown, data.choices(everything), params)

    def runs_fragment(request: Request) -> Response:
        return _security_headers(HTMLResponse(pages.run_rows_html(rows(params_of(request))[1])))

    def runs_json(request: Request) -> Response:
        return json_response(rows(params_of(request))[1])

    def live_json(request: Request) -> Response:
        return json_response([r for r in rows({})[0] if r.get("live")])

    def run_html(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        d = detail(run_id)
        if d is None:
            return html(not_found, f"no run {run_id}", status_code=404)
        ws = Path(d["workspace"]) if d["workspace"] else None
        # agent-written files through autorl.untrusted only; the grader's log from the grader's store only
        logs = {"agent.log": data.tail(ws, "agent.log") if ws else None}
        # the model calls as the LLM gateway recorded them, else the agent's own trajectory file
        turns = trajectory.gateway_trajectory(d.get("result")) or (trajectory.trajectory(ws) if ws else None)
        grader = data.grader_log(d.get("store_dir"))
        found = items.items_page(d.get("result"), _prefixed(request, "items_"), hidden_items(d))
        return html(
            pages.run_page, d, timeline_figure(d), logs, turns, grader, items=items.items_section(run_id, found)
        )

    def timeline_figure(d: data.RunDetail) -> str:
        return charts.timeline_svg(
            d["timeline"], f"{d['row']['agent']} on {d['row']['task']}: dev score per submission"
        )

    def run_json(request: Request) -> Response:
        d = detail(request.path_params["run_id"])
        if d is None:
            return json_response({"error": f"no run {request.path_params['run_id']}"}, status_code=404)
        return json_response(d)

    def items_json(request: Request) -> Response:
        d = detail(request.path_params["run_id"])
        if d is None:
            return json_response({"error": f"no run {request.path_params['run_id']}"}, status_code=404)
        return json_response(items.items_page(d.get("result"), params_of(request), hidden_items(d)).to_dict())

    def timeline_json(request: Request) -> Response:
        d = detail(request.path_params["run_id"])
        if d is None:
            return json_response({"error": f"no run {request.path_params['run_id']}"}, status_code=404)
        return json_response(d["timeline"])

    def timeline_svg(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        d = detail(run_id)
        if d is None:
            return Response(f"no run {run_id}", status_code=404, media_type="text/plain")
        return svg(timeline_figure(d), request, f"autorl-{_safe_name(run_id)}-timeline.svg")

    def comparison(request: Request) -> tuple[list[str], str | None, AgentComparison | None]:
        everything = rows({})[0]
        tasks = sorted({str(r["task"]) for r in everything})
        task = request.query_params.get("task") or (tasks[0] if tasks else None)
        return tasks, task, data.compare(everything, task) if task else None

    def compare_html(request: Request) -> Response:
        tasks, task, cmp = comparison(request)
        figure = charts.compare_svg(cmp) if cmp else ""
        return html(pages.compare_page, tasks, task, cmp, figure)

    def compare_json(request: Request) -> Response:
        _, task, cmp = comparison(request)
        return json_response(cmp or {"task": task, "groups": []})

    def compare_svg(request: Request) -> Response:
        _, task, cmp = comparison(request)
        return svg(
            charts.compare_svg(cmp or data.no_comparison(task or "")),
            request,
            f"autorl-{_safe_name(task or 'none')}-compare.svg",
        )

    app = Starlette(
        routes=[
            Route("/", runs_html),
            Route("/fragment/runs", runs_fragment),
            Route("/runs/{run_id}", run_html),
            Route("/runs/{run_id}/timeline.svg", timeline_svg),
            Route("/compare", compare_html),
            Route("/compare.svg", compare_svg),
            Route("/api/runs", runs_json),
            Route("/api/live", live_json),
            Route("/api/runs/{run_id}", run_json),
            Route("/api/runs/{run_id}/timeline", timeline_json),
            Route("/api/runs/{run_id}/items", items_json),
            Route("/api/compare", compare_json),
            *sweep.routes(db_path.parent / "sweeps", _security_headers),
        ]
    )
    return HostCheck(app, [*LOOPBACK_HOSTS, *(name for h in hosts for name in served_names(h))])


def served_names(host: str) -> list[str]:
    """The names a browser may use for a dashboard listening on ``host``: the address itself, and for a
    wildcard (``0.0.0.0``, ``::``) this machine's host name, full name and addresses."""
    if host not in ("0.0.0.0", "::", ""):
        return [host]
    import socket

    names = {socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        names |= {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    return sorted(n for n in names if n)


def _prefixed(request: Request, prefix: str) -> dict[str, str]:
    """The query parameters named ``<prefix>x``, as ``x`` (a section's own parameters on a page's URL)."""
    return {k[len(prefix) :]: v for k, v in request.query_params.items() if k.startswith(prefix) and v}


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]
