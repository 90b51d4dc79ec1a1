"""Studies: many runs over agents x tasks x models x seeds, placed by an executor, resumable, reported with
uncertainty across seeds. See docs/sweep.md.

``autorl sweep run SPEC`` and :func:`autorl.sweep` run (or resume) a study (this package is callable: once it is
imported, ``autorl.sweep`` names it rather than the lazy function of the package root, and calling it calls
:func:`sweep`); the study's directory holds its truth
as files (:mod:`autorl.sweep.store`); the ledger ingests the counted results (``autorl sweep ingest``).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autorl.sweep.api import ingest, load, plan, sweep
from autorl.sweep.executors import Executor, Launch, get_executor, get_executors
from autorl.sweep.result import StudyResult

__all__ = ["Executor", "Launch", "StudyResult", "get_executor", "get_executors", "ingest", "load", "plan", "sweep"]


class _CallablePackage(types.ModuleType):
    def __call__(self, spec: str | Path | Mapping[str, Any], **options: Any) -> StudyResult:
        return sweep(spec, **options)


sys.modules[__name__].__class__ = _CallablePackage
