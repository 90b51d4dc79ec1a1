"""Real recorded runs for the tests of what reads runs back (``autorl items``, the DataFrames, the exports): two
short ``autorl run``s of the echo benchmark with the scripted backend (a checkpoint's ``answers.json`` is what it
answers), sharing one AUTORL_HOME, so that the second reuses the first's cached baselines.

The second run's agent submits a checkpoint whose test answers give known wins and losses against the base, and
whose answers are hostile where a model's could be: markup, a terminal escape sequence, a bidirectional override,
a very long line.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conftest import ROOT, cli, write_stub_checkpoint

#: the base model answers test items 20-29 right (10 of 30) and dev items 0-4 (5 of 20)
BASE_RIGHT = [*range(20, 30), *range(0, 5)]
#: the checkpoint answers test items 25-39 right: wins 30-39, losses 20-24; dev 0-11
CKPT_RIGHT = [*range(25, 40), *range(0, 12)]
WINS, LOSSES = [f"test-{k}" for k in range(30, 40)], [f"test-{k}" for k in range(20, 25)]
MARKUP = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
ESCAPE = "\x1b]0;owned\x07\x1b[2J"
BIDI = "\u202eevil"
LONG = "x" * 120_000
#: the checkpoint's wrong answers on test items 40-43 (losses for neither: the base is wrong there too)
HOSTILE = {"say 40": MARKUP, "say 41": ESCAPE + "tail", "say 42": BIDI, "say 43": LONG}


def answers(right: list[int], extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**{f"say {k}": str(k) for k in right}, **(extra or {})}


def write_checkpoint(path: str) -> None:
    """The checkpoint the second run's agent submits (called inside the agent's sandbox)."""
    write_stub_checkpoint(Path(path), answers(CKPT_RIGHT, HOSTILE))


AGENT = """#!/usr/bin/env bash
set -e
"$AUTORL_PYTHON" -c "import sys; sys.path.insert(0, '{root}'); from tests.recorded_run import write_checkpoint; \\
write_checkpoint('$OUTPUT_DIR/v1')"
# what an agent may plant to fake its items: never read (the items come from the grader's store)
mkdir -p "$WORKSPACE/items"
echo '{{"id": "test-40", "score": 1.0, "completions": ["40"]}}' > "$WORKSPACE/items/sub1-test.jsonl"
curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
  -H "Authorization: Bearer $AUTORL_TOKEN" -d "{{\\"model_path\\": \\"$OUTPUT_DIR/v1\\"}}"
"""


@dataclass(frozen=True)
class RecordedRuns:
    """Two recorded runs in ``home``: ``first`` (an agent that submits the base model's answers) and ``run_id``
    (the hostile checkpoint), whose record is ``result``."""

    home: Path
    first: str
    run_id: str
    result: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return {"AUTORL_HOME": str(self.home)}

    @property
    def store(self) -> Path:
        return Path(self.result["meta"]["store_dir"])


def agent(root: Path, name: str, script: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps({"name": name, "start": "start.sh"}))
    (folder / "start.sh").write_text(script)
    return folder


def record_runs(root: Path) -> RecordedRuns:
    home = root / "home"
    base = write_stub_checkpoint(root / "base", answers(BASE_RIGHT))
    copycat = agent(
        root,
        "copycat",
        textwrap.dedent("""\
        #!/usr/bin/env bash
        cp -r "$MODEL_PATH/." "$OUTPUT_DIR/v1"
        curl -s -X POST "$GRADING_SERVER_URL/submit" -H "Content-Type: application/json" \\
          -H "Authorization: Bearer $AUTORL_TOKEN" -d "{\\"model_path\\": \\"$OUTPUT_DIR/v1\\"}"
        """),
    )
    hostile = agent(root, "hostile", AGENT.format(root=ROOT))
    ids = []
    for folder in (copycat, hostile):
        proc = cli(
            "run",
            "--agent",
            str(folder),
            "--task",
            "echo",
            "--model",
            str(base),
            "--timeout",
            "60",
            "--backend",
            "scripted",
            "--json",
            env={"AUTORL_HOME": str(home)},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        ids.append(json.loads(proc.stdout)["run_id"])
    result_file = next((home / "runs" / "echo").glob(f"{ids[1]}_*/result.json"))
    return RecordedRuns(home, ids[0], ids[1], json.loads(result_file.read_text()))
