"""Where the Hugging Face hub cannot be reached, `autorl doctor` says so and `autorl run` says the same and fails
at once with the hint of what needed the hub, instead of doctor reporting all is well and run spending 24 s on
five retries. The hub is a local endpoint here (HF_ENDPOINT): a closed port, or a real server that answers."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from autorl.procs.group import free_port

from .conftest import cli, write_stub_checkpoint
from .scripted_llm import serve_in_thread


def _hub_line(env: dict[str, str]) -> dict[str, object]:
    rows = json.loads(cli("doctor", "--json", env=env, check=True).stdout)
    return next(r for r in rows if r["name"] == "Hugging Face hub")


def test_doctor_reports_the_hub_as_run_will_find_it(tmp_path: Path) -> None:
    closed = {
        "AUTORL_HOME": str(tmp_path / "home"),
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "HF_HUB_OFFLINE": "",
    }
    gone = _hub_line(closed)
    assert gone["ok"] is False and "cannot be reached" in str(gone["detail"]), gone
    assert gone["fix"] == "export HF_HUB_OFFLINE=1"
    said = _hub_line({**closed, "HF_HUB_OFFLINE": "1"})
    assert said["ok"] is True and "HF_HUB_OFFLINE is set" in str(said["detail"])
    app = Starlette(routes=[Route("/api/models", lambda request: JSONResponse([]), methods=["GET", "HEAD"])])
    with serve_in_thread(app) as port:
        there = _hub_line({**closed, "HF_ENDPOINT": f"http://127.0.0.1:{port}"})
    assert there["ok"] is True and "reachable" in str(there["detail"])


def test_run_fails_at_once_with_the_hint_of_what_needed_the_hub(tmp_path: Path) -> None:
    env = {
        "AUTORL_HOME": str(tmp_path / "home"),
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "HF_HUB_OFFLINE": "",
        "AUTORL_DATA_DIR": "",
    }
    stub = write_stub_checkpoint(tmp_path / "stub")
    # a plugin's data from the hub (GSM8K): its own hint, and none of huggingface_hub's retries
    data = cli(
        "run",
        "--agent",
        "example",
        "--task",
        "gsm8k",
        "--model",
        str(stub),
        "--backend",
        "scripted",
        "--timeout",
        "30",
        env=env,
    )
    assert data.returncode == 2, data.stderr
    assert (
        data.stderr.strip()
        .splitlines()[-1]
        .startswith("error: GSM8K's train split is neither in a local mirror nor downloadable from the hub")
    ), data.stderr
    assert "Retrying" not in data.stderr and "Traceback" not in data.stderr
    # a hub model: said once that the hub cannot be reached, then the resolver's hint
    model = cli(
        "run", "--agent", "example", "--task", "arith", "--model", "Qwen/Qwen2.5-0.5B", "--timeout", "30", env=env
    )
    assert model.returncode == 2, model.stderr
    lines = model.stderr.strip().splitlines()
    assert "the Hugging Face hub cannot be reached" in lines[0] and "using the local cache only" in lines[0]
    assert lines[-1].startswith("error: model 'Qwen/Qwen2.5-0.5B' is not in the cache and cannot be downloaded")
    assert "Retrying" not in model.stderr
