"""The run wing, and ``autorl.runs(task=, agent=, study=)``: this package is callable, and calling it gives
every recorded run as a pandas DataFrame (:func:`autorl.record.frames.runs`).

The run wing is a run from its names to its record, each step in its own module, and the one *finish*
that a live run and a recovered one share, so that both leave the same record.

    spec      what a run is asked to be: one ``RunSpec``, checked when it is built (``run()``, a study's cell)
    runner    ``autorl.run()`` and ``run_spec()``: the steps below in order
    plan      resolve names (benchmark, agent, backend, GPUs, sandbox) and acquire the model and the data
    gpus      ``--gpus``: which GPUs the agent and the grader get
    place     the run's id, its workspace and its private folders
    workspace the folder the agent lives in: code/, output/, read-only links to model and data, docs
    services  the grader and the LLM gateway, each in its own process; the baseline; the agent's clock
    agent     the agent's process (sandboxed where chosen) until it exits or its deadline
    progress  the lines people watch during a run
    facts     what a run is, fixed before its agent starts (kept in the ledger's live row)
    finish    collect from the grader, test the best, build the record, record it, audit it
    lost      the finish of a run whose orchestrator died
    recover   ``autorl recover``: lost runs found and finished through ``lost``
    interrupt SIGINT, SIGTERM, SIGHUP as an orderly finish
    offtarget off-target regression after a run
    judging   the judged audit with a gateway of its own
    clean     ``autorl clean``: checkpoints of recorded runs deleted by a keep policy
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(
        self, task: str | None = None, agent: str | None = None, study: str | None = None, **options: Any
    ) -> Any:
        """Every recorded run as a pandas DataFrame (:func:`autorl.record.frames.runs`)."""
        from autorl.record.frames import runs

        return runs(task=task, agent=agent, study=study, **options)


sys.modules[__name__].__class__ = _CallablePackage
