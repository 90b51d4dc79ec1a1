"""The dashboard's reader of the studies under ``AUTORL_HOME/sweeps``: the only way its sweep pages
(:mod:`autorl.ui.sweep`) read a study.

A study's folder is partly written by its runs (results, outcomes, reasons), so it is read as hostile input:
every file beneath the sweeps folder through :mod:`autorl.untrusted` (no link followed, on the way or at the
end; sizes capped; malformed JSON is a file that is not there), every row checked for the types the report
reads. The dashboard never writes into a study.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from autorl import untrusted
from autorl.sweep.coordinator import DEFAULT_RETRIES, Study
from autorl.sweep.records import CellRecord, Outcome, StudySpec
from autorl.sweep.spec import Cell
from autorl.sweep.store import Attempt, KeyState, SweepDir
from autorl.ui.shell import is_num

__all__ = ["list_studies", "load_study"]

#: the largest files read from a study folder (a run's result, the expanded cells, a job or outcome record)
RESULT_LIMIT, CELLS_LIMIT, RECORD_LIMIT = 16 << 20, 32 << 20, 1 << 20
MAX_STUDIES, MAX_ATTEMPTS = 1000, 100
#: a test improvement is a difference of scores in percent; a larger one is a malformed result
MAX_IMPROVEMENT = 1e6
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def _is_name(text: object) -> bool:
    """A single, plain path component (study names, run keys)."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


@dataclass
class _SafeAttempt(Attempt):
    """An attempt whose result is read through :mod:`autorl.untrusted`."""

    folder: _SafeSweepDir | None = None

    def result(self) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        data = self.folder.read(f"keys/{self.key}/a{self.number}/result.json", RESULT_LIMIT)
        row = _clean_row(data.get("row")) if isinstance(data, dict) else None
        return {"row": row} if row is not None else None


def _finite(v: Any, bound: float = MAX_IMPROVEMENT) -> bool:
    """A number, finite, at most ``bound`` in size (an integer too large for a float is not)."""
    try:
        return is_num(v) and math.isfinite(v) and abs(v) <= bound
    except OverflowError:
        return False


def _clean_row(row: Any) -> dict[str, Any] | None:
    """A result's ledger row with only what the report reads, each of the type it expects; None when the row
    is malformed (no run id, names that are not strings, a seed that is not a scalar, an improvement that is
    not a number in range)."""
    if not isinstance(row, dict):
        return None
    run_id, improvement, ci = row.get("run_id"), row.get("improvement"), row.get("improvement_ci95")
    if not (isinstance(run_id, str) and 0 < len(run_id) <= 200) or not (improvement is None or _finite(improvement)):
        return None
    if not all(isinstance(row.get(k), str) for k in ("task", "agent", "base_model")):
        return None
    if not all(row.get(k) is None or isinstance(row.get(k), str | int) for k in ("seed", "config_hash")):
        return None
    clean = {k: v for k, v in row.items() if v is None or isinstance(v, str | bool | int) or _finite(v, math.inf)}
    clean["improvement_ci95"] = ci if isinstance(ci, list) and len(ci) == 2 and all(_finite(v) for v in ci) else None
    clean["success"] = row.get("success") is True
    clean.pop("live", None)
    return clean


class _SafeSweepDir(SweepDir):
    """A study folder beneath ``base`` read as hostile input (read-only: the dashboard never writes)."""

    def __init__(self, base: Path, name: str) -> None:
        super().__init__(base / name)
        self.base = base

    def read(self, relpath: str, limit: int) -> Any:
        """The JSON at ``relpath`` in the study; None when absent, reached through a link, too large or malformed."""
        try:
            return untrusted.read_json(self.base, f"{self.name}/{relpath}", limit=limit)
        except untrusted.UntrustedFileError:
            return None

    def exists(self) -> bool:
        return isinstance(self.read("sweep.json", RECORD_LIMIT), dict)

    def spec(self) -> StudySpec:
        data = self.read("sweep.json", RECORD_LIMIT)
        spec = data.get("spec") if isinstance(data, dict) else None
        return cast(StudySpec, dict(spec) if isinstance(spec, dict) else {})

    def cells(self) -> list[CellRecord]:
        data = self.read("cells.json", CELLS_LIMIT)
        out: list[CellRecord] = []
        for c in data if isinstance(data, list) else []:
            options = c.get("options") if isinstance(c, dict) else None
            if (
                isinstance(options, dict)
                and _is_name(c.get("run_key"))
                and all(k in options for k in ("agent", "task", "model", "seed"))
            ):
                out.append(
                    cast(
                        CellRecord,
                        {
                            "options": options,
                            "run_key": c["run_key"],
                            "identity": c["identity"] if isinstance(c.get("identity"), dict) else {},
                        },
                    )
                )
        return out

    def key_state(self, key: str) -> KeyState:
        state = KeyState(key)
        if not _is_name(key):
            return state
        numbers = []
        try:
            with untrusted.open_dir_beneath(self.base, f"{self.name}/keys/{key}") as fd:
                for name in os.listdir(fd):
                    if name.startswith("a") and name[1:].isdigit() and len(name) < 10:
                        with contextlib.suppress(OSError):
                            if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                                numbers.append(int(name[1:]))
        except untrusted.UntrustedFileError:
            return state
        for n in sorted(numbers)[:MAX_ATTEMPTS]:
            job, outcome = (self.read(f"keys/{key}/a{n}/{f}", RECORD_LIMIT) for f in ("job.json", "outcome.json"))
            state.attempts.append(
                _SafeAttempt(
                    key,
                    n,
                    self.attempt_dir(key, n),
                    job if isinstance(job, dict) else None,
                    cast(Outcome, outcome) if isinstance(outcome, dict) else None,
                    folder=self,
                )
            )
        return state


def load_study(root: Path, name: str) -> Study | None:
    """The study ``name`` in the sweeps folder ``root``, read as hostile input; None when there is none."""
    if not _is_name(name):
        return None
    folder = _SafeSweepDir(root, name)
    if not folder.exists():
        return None
    spec = folder.spec()
    retries = spec.get("retries", DEFAULT_RETRIES)
    retries = (
        retries if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0 else DEFAULT_RETRIES
    )
    cells = [Cell(options=c["options"], run_key=c["run_key"], identity=c["identity"]) for c in folder.cells()]
    study = Study(name, folder, cells, spec, retries)
    study.refresh()
    return study


def list_studies(root: Path) -> list[dict[str, Any]]:
    """Each study folder in ``root`` (a plain directory with a ``sweep.json``): its name, cells and how many
    keys are in each state."""
    try:
        entries = sorted(e.name for e in os.scandir(root) if _is_name(e.name) and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    out = []
    for name in entries[:MAX_STUDIES]:
        study = load_study(root, name)
        if study is not None:
            out.append(
                {
                    "sweep": name,
                    "cells": len(study.cells),
                    "counts": study.counts(),
                    "agents": sorted({str(c["agent"]) for c in study.cells}),
                    "tasks": sorted({str(c["task"]) for c in study.cells}),
                }
            )
    return out
