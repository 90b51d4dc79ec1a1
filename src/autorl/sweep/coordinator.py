"""The coordinator: expands a study, places the attempts its keys still need, records how each ended, retries
infrastructure failures only, and ingests each counted result into the ledger (the only writer of it).

Resume is the same call: a key with a counted attempt is never run again; an attempt left without an outcome by
a coordinator that is gone is reattached through its executor or recorded as an infrastructure failure.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorl.errors import UsageError
from autorl.sweep.executors import Executor, Launch, get_executor
from autorl.sweep.keys import Resolver
from autorl.sweep.records import Payload, StudySpec
from autorl.sweep.spec import Cell, expand_options, load_spec, study_name
from autorl.sweep.spec import executor_options as executor_options_of
from autorl.sweep.store import INFRA, QUEUED, Attempt, KeyState, SweepDir, write_json
from autorl.sweep.worker import RUN_PROGRAM_ENV

DEFAULT_RETRIES = 2
POLL_S = 0.5
Update = Callable[["Study", dict[str, KeyState]], None]


@dataclass
class Study:
    """A study's cells and its directory."""

    name: str
    dir: SweepDir
    cells: list[Cell]
    spec: StudySpec
    retries: int = DEFAULT_RETRIES
    states: dict[str, KeyState] = field(default_factory=dict)

    def refresh(self) -> dict[str, KeyState]:
        self.states = self.dir.states([c.run_key for c in self.cells])
        return self.states

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for state in self.states.values():
            s = state.status(self.retries)
            out[s] = out.get(s, 0) + 1
        return out


def home() -> Path:
    from autorl.resources import autorl_home

    return autorl_home()


def sweeps_root() -> Path:
    return home() / "sweeps"


def expand(
    spec_source: str | Path | Mapping[str, Any], sweep_dir: Path | None = None, resolver: Resolver | None = None
) -> Study:
    """The study a spec declares: every cell with its run key; two cells with one key are an error."""
    spec = load_spec(spec_source)
    default = Path(spec_source).stem if isinstance(spec_source, str | Path) else "sweep"
    name = study_name(spec, default)
    resolver = resolver or Resolver()
    cells: list[Cell] = []
    seen: dict[str, Cell] = {}
    for options in expand_options(spec):
        cell = resolver.identify(options)
        if cell.run_key in seen:
            raise UsageError(
                f"spec: the cell {cell.label} appears twice (run_key {cell.run_key}); "
                "drop the duplicate include or list value"
            )
        seen[cell.run_key] = cell
        cells.append(cell)
    retries = spec.get("retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UsageError(f"spec: retries must be a non-negative integer, not {retries!r}")
    root = sweep_dir or sweeps_root() / name
    return Study(name, SweepDir(root), cells, spec, retries)


def open_study(sweep: str | Path) -> Study:
    """A study from its directory, its spec file (the one ``sweep run`` took), or its name under
    ``AUTORL_HOME/sweeps``."""
    path = Path(sweep).expanduser()
    if path.is_file():  # the spec: its study's folder, where `sweep run SPEC` puts it
        path = expand(path, None).dir.root
    elif not path.is_dir() and "/" not in str(sweep):
        path = sweeps_root() / str(sweep)
    folder = SweepDir(path)
    if not folder.exists():
        raise UsageError(f"no sweep at {path} (give its directory, or a name under {sweeps_root()})")
    spec = folder.spec()
    cells = [Cell.from_record(c) for c in folder.cells()]
    study = Study(folder.name, folder, cells, spec, int(spec.get("retries", DEFAULT_RETRIES)))
    study.refresh()
    return study


def _prepare(study: Study) -> None:
    """Each task's data and hidden items in the shared home, once, before any run copies them."""
    from autorl.plugins.registry import get_benchmark
    from autorl.resources import prepare_data

    done: set[str] = set()
    for cell in study.cells:
        key = f"{cell['task']}{sorted(cell['benchmark_options'].items())}"
        if key not in done:
            prepare_data(get_benchmark(cell["task"])(dict(cell["benchmark_options"])), home())
            done.add(key)


def _new_attempt(study: Study, cell: Cell, state: KeyState) -> Attempt:
    number = max((a.number for a in state.attempts), default=0) + 1
    path = study.dir.attempt_dir(cell.run_key, number)
    path.mkdir(parents=True, exist_ok=False)
    program = os.environ.get(RUN_PROGRAM_ENV)
    import shlex

    sweep_id = hashlib.sha256(str(study.dir.root.resolve()).encode()).hexdigest()[:8]
    payload: Payload = {
        "run_key": cell.run_key,
        "attempt": number,
        "sweep": study.name,
        "sweep_id": sweep_id,
        "sweep_dir": str(study.dir.root.resolve()),
        "args": cell.run_args(),
        "options": cell.options,
        "home": str(home().resolve()),
        "gpus": None,
        "program": shlex.split(program) if program else None,
    }
    write_json(path / "payload.json", payload)
    attempt = Attempt(cell.run_key, number, path)
    state.attempts.append(attempt)
    return attempt


class Coordinator:
    """Runs a study to its end on one executor."""

    def __init__(
        self,
        study: Study,
        executor: Executor,
        *,
        max_parallel: int | None = None,
        on_update: Update | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self.study = study
        self.executor = executor
        self.max_parallel = max_parallel
        self.on_update = on_update
        self.poll_s = poll_s
        self.ledger_home = home()
        self.by_key = {c.run_key: c for c in study.cells}
        self._ledger: Any = None

    def _ingest(self, attempt: Attempt) -> None:
        """Record a counted result in the ledger; one that cannot be (a row without its keys: an older version's
        file, a hostile one; a run id recorded for another execution) is one line on stderr, and the study goes
        on: its report reads the attempt's own files."""
        import sys

        from autorl.errors import ResourceError
        from autorl.record.ledger import Ledger, check_result

        result = attempt.result()
        if result is None:
            return
        try:
            if self._ledger is None:
                self._ledger = Ledger(self.ledger_home / "autorl.db")
            self._ledger.ingest(check_result(result, attempt.path / "result.json"))
        except ResourceError as exc:
            print(f"autorl sweep: not recorded in the ledger: {exc}", file=sys.stderr)

    def _settle(self, attempt: Attempt) -> bool:
        """Whether the attempt has ended (recording an infrastructure failure when its job is gone)."""
        from autorl.sweep.store import read_json

        if attempt.job is None:  # created, never placed (the coordinator stopped in between)
            if read_json(attempt.path / "outcome.json") is None:
                self.study.dir.finish(attempt, INFRA, "never placed: the coordinator stopped before")
        else:
            gone = self.executor.poll(attempt.job)  # also how the executor learns its slot is free
            if gone is None:
                return False
            outcome = read_json(attempt.path / "outcome.json")
            if outcome is not None:
                attempt.outcome = outcome
            else:
                self.study.dir.finish(attempt, INFRA, gone if gone != "finished" else "ended without an outcome")
        if attempt.outcome is None:
            attempt.outcome = read_json(attempt.path / "outcome.json")
        if attempt.counts:
            self._ingest(attempt)
        return True

    def run(self) -> Study:
        study, executor = self.study, self.executor
        study.dir.claim_coordinator()
        states = study.refresh()
        running: list[Attempt] = []
        for state in states.values():  # attempts a coordinator left behind
            attempt = state.running
            if attempt is not None and not self._settle(attempt):
                running.append(attempt)
        cap = min(x for x in (self.max_parallel, executor.capacity(), 10**9) if x is not None)
        changed = True
        try:
            while True:
                queued = [k for k, s in states.items() if s.status(study.retries) == QUEUED]
                room = cap - len(running)
                refused = False
                if queued and room > 0:
                    launches = []
                    for key in queued[:room]:
                        cell = self.by_key[key]
                        attempt = _new_attempt(study, cell, states[key])
                        launches.append(
                            (attempt, Launch(attempt.path, int(cell["gpus"]), float(cell["timeout"]), cell.label))
                        )
                    jobs = executor.start([launch for _, launch in launches])
                    refused = not running and all(job is None for job in jobs)
                    for (attempt, _), job in zip(launches, jobs, strict=True):
                        if job is None:  # no room on the executor now: the folder goes, the key stays queued
                            import shutil

                            shutil.rmtree(attempt.path, ignore_errors=True)
                            states[attempt.key].attempts.remove(attempt)
                            continue
                        job["submitted"] = job.get("submitted", time.time())
                        write_json(attempt.path / "job.json", job)
                        attempt.job = job
                        running.append(attempt)
                        changed = True
                for attempt in list(running):
                    if self._settle(attempt):
                        running.remove(attempt)
                        changed = True
                if changed and self.on_update is not None:
                    self.on_update(study, states)
                changed = False
                if not running:
                    if not any(s.status(study.retries) == QUEUED for s in states.values()):
                        break
                    if refused:  # nothing runs and the executor placed none of what is queued: it never will
                        raise UsageError(f"the {executor.name} executor cannot place any run now (no slot or GPU free)")
                time.sleep(self.poll_s)
        finally:
            executor.close()
            if self._ledger is not None:
                self._ledger.export_csv(self.ledger_home / "results.csv")
                self._ledger.close()
        return study


def run_sweep(
    spec: str | Path | Mapping[str, Any],
    *,
    executor: str = "local",
    executor_options: Mapping[str, Any] | None = None,
    max_parallel: int | None = None,
    retries: int | None = None,
    sweep_dir: Path | None = None,
    on_update: Update | None = None,
    poll_s: float = POLL_S,
) -> Study:
    """Run (or resume) a study; see :func:`autorl.sweep`."""
    study = expand(spec, sweep_dir)
    if retries is not None:
        if retries < 0:
            raise UsageError("--retries must be a non-negative integer")
        study.retries = retries
        study.spec["retries"] = retries
    if max_parallel is not None and max_parallel < 1:
        raise UsageError("--max-parallel must be a positive integer")
    options = {**executor_options_of(study.spec, executor), **dict(executor_options or {})}
    ex = get_executor(executor)(options, max_parallel=max_parallel, sweep_dir=study.dir.root)
    for cell in study.cells:
        ex.check(int(cell["gpus"]), cell.label)
    ex.check_cells([cell.options for cell in study.cells])
    _prepare(study)
    study.dir.create(study.spec, [c.as_dict() for c in study.cells])
    return Coordinator(study, ex, max_parallel=max_parallel, on_update=on_update, poll_s=poll_s).run()
