"""A sweep directory: the files that are a study's truth. Every write is atomic (temp file + rename).

```
<sweep>/sweep.json                       the spec as given, its name, autorl's version
<sweep>/cells.json                       the expanded cells (run key, options, identity)
<sweep>/coordinator.json                 the coordinator that last ran (pid, host, started)
<sweep>/keys/<run_key>/a<N>/payload.json what attempt N runs (autorl run's arguments, the homes)
<sweep>/keys/<run_key>/a<N>/job.json     where it runs (executor, job id, pid, GPUs, submitted)
<sweep>/keys/<run_key>/a<N>/outcome.json how it ended: a result, or an infrastructure failure and why
<sweep>/keys/<run_key>/a<N>/result.json  the run's result (run id = run key, sweep id, attempt; run_key, sweep)
<sweep>/keys/<run_key>/a<N>/run.log      autorl run's output
<sweep>/keys/<run_key>/a<N>/grader/      the grader's store, copied from the node's local disk
```

Exactly one attempt per key counts: the first whose outcome is a result (a run that crashed, submitted nothing or
timed out is a result too). Attempts whose outcome is ``infra`` are retried; their reasons are kept.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from autorl.errors import UsageError
from autorl.sweep.records import CellRecord, Outcome, StudySpec

RESULT = "result"
INFRA = "infra"
#: the states a key shows in ``status`` and the live table
QUEUED, RUNNING, DONE, FAILED, GAVE_UP = "queued", "running", "done", "failed", "gave up"


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON, whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump(data, f, indent=1, default=str)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def read_json(path: Path) -> Any:
    """The JSON in ``path``; None when it is missing or unreadable (a torn write never happens: see write_json)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_outcome(path: Path) -> Outcome | None:
    """An attempt's ``outcome.json``; None when it is missing, unreadable or not a record with a ``kind``."""
    data = read_json(path)
    return cast(Outcome, data) if isinstance(data, dict) and isinstance(data.get("kind"), str) else None


@dataclass
class Attempt:
    """One try at a key, read from its folder."""

    key: str
    number: int
    path: Path
    #: the executor's record of the job (its own fields: what its ``poll`` needs)
    job: dict[str, Any] | None = None
    outcome: Outcome | None = None

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    @property
    def counts(self) -> bool:
        return self.outcome is not None and self.outcome.get("kind") == RESULT

    @property
    def reason(self) -> str:
        return str((self.outcome or {}).get("reason", ""))

    def result(self) -> dict[str, Any] | None:
        data = read_json(self.path / "result.json")
        return data if isinstance(data, dict) and isinstance(data.get("row"), dict) else None


@dataclass
class KeyState:
    """A key's attempts and what they add up to."""

    key: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def counted(self) -> Attempt | None:
        return next((a for a in self.attempts if a.counts), None)

    @property
    def running(self) -> Attempt | None:
        return next((a for a in self.attempts if not a.finished), None)

    @property
    def infra_failures(self) -> int:
        return sum(1 for a in self.attempts if a.finished and not a.counts)

    def status(self, retries: int) -> str:
        counted = self.counted
        if counted is not None:
            return DONE if (counted.outcome or {}).get("success") else FAILED
        if self.running is not None:
            return RUNNING
        return GAVE_UP if self.infra_failures > retries else QUEUED


class SweepDir:
    """The files of one study."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def keys_dir(self) -> Path:
        return self.root / "keys"

    def exists(self) -> bool:
        return (self.root / "sweep.json").is_file()

    def create(self, spec: StudySpec, cells: list[CellRecord]) -> None:
        from autorl.version import __version__

        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        write_json(self.root / "sweep.json", {"name": self.name, "spec": spec, "autorl_version": __version__})
        write_json(self.root / "cells.json", cells)

    def spec(self) -> StudySpec:
        data = read_json(self.root / "sweep.json")
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict):
            raise UsageError(f"{self.root} is not a sweep directory (no sweep.json); see `autorl sweep run`")
        return cast(StudySpec, dict(data["spec"]))  # written by SweepDir.create, its keys checked

    def cells(self) -> list[CellRecord]:
        data = read_json(self.root / "cells.json")
        if not isinstance(data, list) or not all(
            isinstance(c, dict) and isinstance(c.get("options"), dict) and isinstance(c.get("run_key"), str)
            for c in data
        ):
            raise UsageError(f"{self.root} is not a sweep directory (no cells.json)")
        return cast(list[CellRecord], data)

    def attempt_dir(self, key: str, number: int) -> Path:
        return self.keys_dir / key / f"a{number}"

    def key_state(self, key: str) -> KeyState:
        state = KeyState(key)
        folder = self.keys_dir / key
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return state
        for entry in entries:
            name = entry.name
            if not (name.startswith("a") and name[1:].isdigit()):
                continue
            path = Path(entry.path)
            job = read_json(path / "job.json")
            state.attempts.append(
                Attempt(
                    key,
                    int(name[1:]),
                    path,
                    job if isinstance(job, dict) else None,
                    read_outcome(path / "outcome.json"),
                )
            )
        state.attempts.sort(key=lambda a: a.number)
        return state

    def states(self, keys: list[str]) -> dict[str, KeyState]:
        return {k: self.key_state(k) for k in keys}

    def finish(self, attempt: Attempt, kind: str, reason: str, **extra: Any) -> None:
        """Record how an attempt ended, unless it already has an outcome (the first writer wins)."""
        path = attempt.path / "outcome.json"
        if path.exists():
            attempt.outcome = read_outcome(path)
            return
        outcome = cast(Outcome, {"kind": kind, "reason": reason, "finished": time.time(), **extra})
        write_json(path, outcome)
        attempt.outcome = outcome

    def claim_coordinator(self) -> None:
        write_json(
            self.root / "coordinator.json", {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        )
