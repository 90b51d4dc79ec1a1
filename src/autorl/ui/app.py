"""The dashboard's routes: HTML pages, their JSON, and the figures as SVG.

- ``/``: runs (filters ``task agent model status since until``, ``sort`` + ``order``); ``/fragment/runs`` its rows
- ``/runs/{id}``: one run (timeline, numbers, metadata, logs, trajectory); live runs update themselves
- ``/compare?task=&metric=``: agents side by side on a task
- ``/api/runs``, ``/api/runs/{id}``, ``/api/runs/{id}/timeline``, ``/api/compare``, ``/api/live``: JSON
- ``/runs/{id}/timeline.svg``, ``/compare.svg``: the figures (``?download=1`` to save them)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from autorl.ledger import Ledger
from autorl.ui import charts, data, pages


def create_app(db_path: Path) -> Starlette:
    """The dashboard over the ledger at ``db_path`` (read at each request, so new runs appear)."""

    def ledger() -> Ledger:
        return Ledger(db_path)

    def rows(params: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        led = ledger()
        try:
            everything = data.all_rows(led)
        finally:
            led.close()
        return everything, data.filter_rows(everything, params)

    def detail(run_id: str) -> dict[str, Any] | None:
        led = ledger()
        try:
            return data.run_detail(led, run_id)
        finally:
            led.close()

    def svg(body: str, request: Request, name: str) -> Response:
        headers = {"Cache-Control": "no-store"}
        if request.query_params.get("download"):
            headers["Content-Disposition"] = f'attachment; filename="{name}"'
        return Response(body, media_type="image/svg+xml", headers=headers)

    def params_of(request: Request) -> dict[str, str]:
        return {k: v for k, v in request.query_params.items() if v}

    def runs_html(request: Request) -> Response:
        params = params_of(request)
        everything, shown = rows(params)
        return HTMLResponse(pages.runs_page(shown, data.choices(everything), params))

    def runs_fragment(request: Request) -> Response:
        return HTMLResponse(pages.run_rows_html(rows(params_of(request))[1]))

    def runs_json(request: Request) -> Response:
        return JSONResponse(rows(params_of(request))[1])

    def live_json(request: Request) -> Response:
        return JSONResponse([r for r in rows({})[0] if r.get("live")])

    def run_html(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        d = detail(run_id)
        if d is None:
            return HTMLResponse(pages.not_found(f"no run {run_id}"), status_code=404)
        ws = Path(d["workspace"]) if d.get("workspace") else None
        logs = {"agent.log": data.tail(ws / "agent.log") if ws else None,
                "grading_server.log": data.tail(ws / "grading_server.log") if ws else None}
        turns = data.trajectory(ws) if ws else None
        figure = charts.timeline_svg(d["timeline"], f"{d['row']['agent']} on {d['row']['task']}: dev score per submission")
        return HTMLResponse(pages.run_page(d, figure, logs, turns))

    def run_json(request: Request) -> Response:
        d = detail(request.path_params["run_id"])
        if d is None:
            return JSONResponse({"error": f"no run {request.path_params['run_id']}"}, status_code=404)
        return JSONResponse(d)

    def timeline_json(request: Request) -> Response:
        d = detail(request.path_params["run_id"])
        if d is None:
            return JSONResponse({"error": f"no run {request.path_params['run_id']}"}, status_code=404)
        return JSONResponse(d["timeline"])

    def timeline_svg(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        d = detail(run_id)
        if d is None:
            return Response(f"no run {run_id}", status_code=404, media_type="text/plain")
        figure = charts.timeline_svg(d["timeline"], f"{d['row']['agent']} on {d['row']['task']}: dev score per submission")
        return svg(figure, request, f"autorl-{run_id}-timeline.svg")

    def comparison(request: Request) -> tuple[list[str], str | None, str, dict[str, Any] | None]:
        everything = rows({})[0]
        tasks = sorted({str(r["task"]) for r in everything})
        task = request.query_params.get("task") or (tasks[0] if tasks else None)
        metric = request.query_params.get("metric") or "auto"
        if metric not in ("auto", "test_improvement", "improvement"):
            raise ValueError("metric must be auto, test_improvement or improvement")
        return tasks, task, metric, data.compare(everything, task, metric) if task else None

    def compare_html(request: Request) -> Response:
        try:
            tasks, task, metric, cmp = comparison(request)
        except ValueError as exc:
            return HTMLResponse(pages.not_found(str(exc)), status_code=400)
        figure = charts.compare_svg(cmp) if cmp else ""
        return HTMLResponse(pages.compare_page(tasks, task, cmp, figure, metric))

    def compare_json(request: Request) -> Response:
        try:
            _, task, _, cmp = comparison(request)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse(cmp or {"task": task, "agents": []})

    def compare_svg(request: Request) -> Response:
        try:
            _, task, _, cmp = comparison(request)
        except ValueError as exc:
            return Response(str(exc), status_code=400, media_type="text/plain")
        return svg(charts.compare_svg(cmp or {"task": task or "", "agents": []}), request,
                   f"autorl-{task or 'none'}-compare.svg")

    return Starlette(routes=[
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
        Route("/api/compare", compare_json),
    ])
