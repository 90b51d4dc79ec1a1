"""The capability URL: an agent written for the reference harness submits with no token and is authenticated by
the URL it was given; every other way in without the token is refused, and the token stays out of the log."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from autorl.grader.capability import capability_url

from .conftest import echo_answers, write_stub_checkpoint
from .grader_harness import RunningGrader, make_config, start_grader


@pytest.fixture
def grader(tmp_path: Path) -> Iterator[RunningGrader]:
    base = write_stub_checkpoint(tmp_path / "base", echo_answers(5))
    g = start_grader(make_config(tmp_path, base_model=str(base)))
    yield g
    g.stop()


def test_a_reference_agent_submits_through_its_url_and_nothing_else_gets_in(grader: RunningGrader) -> None:
    token = grader.config.agent_token
    url = capability_url(grader.url, token)
    write_stub_checkpoint(grader.output / "v1", echo_answers(15))
    # exactly the reference's example agent: POST {"model_path": ...} to $GRADING_SERVER_URL/submit, no header
    out = subprocess.run(
        [
            "curl",
            "-s",
            "-X",
            "POST",
            f"{url}/submit",
            "-H",
            "Content-Type: application/json",
            "-d",
            json.dumps({"model_path": f"{grader.output}/v1"}),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    rec = json.loads(out)
    assert rec["submission_id"] == 1 and rec["score"] == pytest.approx(75.0)
    with httpx.Client(timeout=30) as c:
        assert c.get(f"{url}/submissions").json()[0]["submission_id"] == 1
        # the header way keeps working
        assert c.get(f"{grader.url}/time", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        # without the token: refused, whether no path, another token, a token's prefix, or a path trick
        assert c.get(f"{grader.url}/submissions").status_code == 401
        for bad in (
            capability_url(grader.url, "x" + token[1:]),
            capability_url(grader.url, token[:-1]),
            f"{grader.url}/r/",
            f"{grader.url}/r//submissions",
            f"{grader.url}/r/{token}x",
        ):
            assert c.get(f"{bad}/submissions").status_code == 401, bad
        # a wrong header is not rescued by the path, and the agent's URL never reaches the admin's endpoints
        assert c.get(f"{url}/submissions", headers={"Authorization": "Bearer nope"}).status_code == 401
        assert c.get(f"{url}/admin/state").status_code == 403
        assert c.post(f"{url}/admin/close").status_code == 403
    grader.stop()
    logged = "".join(p.read_text(errors="replace") for p in Path(grader.config.store_dir).glob("*.log"))
    assert "/submit" in logged and token not in logged


@pytest.mark.e2e
def test_a_run_records_what_a_reference_agent_submitted_without_a_token(home: Path, tmp_path: Path) -> None:
    from .conftest import cli
    from .test_run import agent_folder

    base = write_stub_checkpoint(tmp_path / "stub-base", {**echo_answers(5), **echo_answers(6, "test")})
    # the reference's example agent: no AUTORL_TOKEN anywhere, only GRADING_SERVER_URL
    agent = agent_folder(
        tmp_path / "agents",
        "reference",
        """
        make_ckpt v1 12 null 21
        curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
            -d "{\\"model_path\\": \\"$OUTPUT_DIR/v1\\"}" > "$WORKSPACE/code/submit.json"
    """,
    )
    proc = cli(
        "run",
        "--agent",
        str(agent),
        "--task",
        "echo",
        "--model",
        str(base),
        "--timeout",
        "120",
        "--backend",
        "scripted",
        "--sandbox",
        "none",
        "--no-audit",
        "--json",
        env={"AUTORL_HOME": str(home)},
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert row["submissions"] == 1 and row["best_score"] == pytest.approx(70.0)
    ws = Path(row["workspace"])
    answer = json.loads((ws / "code" / "submit.json").read_text())
    assert answer["submission_id"] == 1 and answer["score"] == pytest.approx(60.0)
    # every record of the submission says how it was evaluated: the agent's answer, scores.json, result.json
    mirror = json.loads((ws / "scores.json").read_text())
    recorded = json.loads((ws / "result.json").read_text())
    for rec in (answer, _first(mirror), recorded["submissions"][0], recorded["test"]):
        assert rec["engine"] in ("fresh", "reused", "reloaded"), rec
        assert rec["load_s"] >= 0 and rec["generate_s"] >= 0 and {"wake_s", "sleep_s"} <= rec.keys()


def _first(mirror: object) -> dict[str, object]:
    subs = mirror["submissions"] if isinstance(mirror, dict) else mirror
    assert isinstance(subs, list)
    return dict(subs[0])


def test_the_dashboard_shows_how_each_submission_was_evaluated() -> None:
    from autorl.record.charts import timeline_svg
    from autorl.record.timeline import timeline_of_result

    sub = {
        "submission_id": 1,
        "status": "done",
        "score": 60.0,
        "ci95": [50.0, 70.0],
        "created_at": 100.0,
        "finished_at": 101.0,
        "engine": "reused",
        "load_s": 0.5,
        "generate_s": 2.5,
        "wake_s": 0.1,
        "sleep_s": None,
    }
    tl = timeline_of_result({"meta": {"agent_started": 90.0}, "submissions": [sub], "baseline": {"score": 25.0}})
    (point,) = tl["points"]
    assert (point["engine"], point["load_s"], point["generate_s"], point["wake_s"]) == ("reused", 0.5, 2.5, 0.1)
    assert "submission 1: 60.00 at" in timeline_svg(tl)
    assert "engine reused (wake 0.1 s, load 0.5 s, generate 2.5 s)" in timeline_svg(tl)
