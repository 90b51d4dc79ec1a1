"""What the hostile agents share: the test's instructions (``ATTACK``), submitting, and recording results.

Each agent writes what it tried and what the grader answered to ``$WORKSPACE/code/attempts.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

CFG: dict[str, Any] = json.loads(os.environ["ATTACK"])
WS = Path(os.environ["WORKSPACE"])
OUTPUT = Path(os.environ["OUTPUT_DIR"])
URL = os.environ["GRADING_SERVER_URL"]
AUTH = {"Authorization": f"Bearer {os.environ['AUTORL_TOKEN']}"}
attempts: list[dict[str, Any]] = []
sys.path.insert(0, CFG["tests_root"])


def submit(model_path: str, label: str) -> dict[str, Any]:
    """POST /submit and record the status and body the grader gave back."""
    r = httpx.post(URL + "/submit", json={"model_path": model_path}, headers=AUTH, timeout=120, trust_env=False)
    got = {"label": label, "model_path": model_path, "status": r.status_code, "body": r.json()}
    attempts.append(got)
    return got


def finish() -> None:
    (WS / "code" / "attempts.json").write_text(json.dumps(attempts, indent=1))
