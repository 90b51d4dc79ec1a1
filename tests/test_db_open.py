"""Opening a new database from many processes at once (a study's runs sharing a node's home) never fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

OPEN = """
import sys, time
from pathlib import Path
start = float(sys.argv[2])
while time.time() < start:
    pass
{body}
"""


@pytest.mark.parametrize(
    "body",
    [
        "from autorl.record.ledger import Ledger\nLedger(Path(sys.argv[1]) / 'autorl.db').close()",
        "from autorl.grader.store import Store\nStore(Path(sys.argv[1]) / 'store.db')",
    ],
    ids=["ledger", "grader-store"],
)
def test_many_processes_opening_one_new_database_at_once_all_succeed(tmp_path: Path, body: str) -> None:
    import time

    for round_ in range(6):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        # every process is imported and spinning before the first connects; the old open (WAL pragma, then the
        # schema statement by statement) failed 4 of 192 such opens here with "database is locked"
        start = time.time() + 3.0
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN.format(body=body), str(folder), str(start)],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(24)
        ]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 24, "\n".join(e for e in errors if e)[-2000:]
