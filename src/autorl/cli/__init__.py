"""The ``autorl`` command line: a thin layer over the library, one module per group of commands (flags, one
library call, printing); heavy imports stay inside the commands, so ``autorl --help`` stays light.

    runs       run, results, recover, clean, audit, ui
    items      items (a run's items, base beside checkpoint)
    grading    eval, submit, grader serve
    installed  plugins, list, doctor, new
    sweep      sweep run, status, report, ingest
    export     export harbor, eee, mlflow

    app        every command in ``autorl --help``'s order; user mistakes as one line
"""

from __future__ import annotations

from autorl.cli.app import app, command, main

__all__ = ["app", "command", "main"]
