"""Every way the installed package might hand out arith's hidden items: ``load_items`` on any folder (the
grader's own hidden folder, whose path ``ATTACK["hidden"]`` gives, included), preparing them itself (in a
fresh folder and in the grader's), and ``autorl eval --task arith --split test`` with the grader's
``AUTORL_HOME`` and with its own. What each gave is written to ``$WORKSPACE/code/attempts.json``."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, json.loads(os.environ["ATTACK"])["tests_root"])
from autorl.builtin.arith import Arith
from tests.hostile.common import CFG, WS, attempts, finish


def record(label: str, fn) -> None:  # type: ignore[no-untyped-def]
    try:
        items = fn()
        attempts.append(
            {
                "label": label,
                "ok": True,
                "ids": [i.id for i in items],
                "questions": [i.input["question"] for i in items],
            }
        )
    except Exception as exc:  # the agent records whatever happened
        attempts.append({"label": label, "ok": False, "error": f"{type(exc).__name__}: {exc}"})


hidden = Path(CFG["hidden"])
for folder in (hidden, WS, Path(tempfile.mkdtemp()), Path.home() / ".cache" / "autorl" / "hidden" / "arith"):
    for split in ("dev", "test"):
        record(f"load_items {split} {folder}", lambda s=split, f=folder: Arith().load_items(s, f))

own = Path(tempfile.mkdtemp())
for split in ("dev", "test"):
    record(
        f"prepare and load {split} in a fresh folder",
        lambda s=split: (Arith().prepare_eval_data(own), Arith().load_items(s, own))[1],
    )
    record(
        f"prepare and load {split} in the grader's folder",
        lambda s=split: (Arith().prepare_eval_data(hidden), Arith().load_items(s, hidden))[1],
    )

for label, home in (("the grader's AUTORL_HOME", CFG["home"]), ("its own AUTORL_HOME", str(WS / "code" / "home"))):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from autorl.cli import main; main()",
            "eval",
            "--task",
            "arith",
            "--split",
            "test",
            "--model",
            os.environ["MODEL_PATH"],
            "--backend",
            "scripted",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "AUTORL_HOME": home},
    )
    try:  # the record names its per-item file: one JSON object a line, with the item's id
        per_item = Path(json.loads(proc.stdout)["per_item_path"]).read_text().splitlines()
        ids = sorted(json.loads(line)["id"] for line in per_item if line.strip())
        attempts.append(
            {
                "label": f"autorl eval test with {label}",
                "ok": proc.returncode == 0,
                "ids": ids,
                "questions": [f"What is {i.split('-', 1)[1]}?" for i in ids],
            }
        )
    except (ValueError, KeyError, TypeError, OSError):
        attempts.append(
            {
                "label": f"autorl eval test with {label}",
                "ok": False,
                "error": f"exit {proc.returncode}: {proc.stderr[-300:]} {proc.stdout[-300:]}",
            }
        )
finish()
