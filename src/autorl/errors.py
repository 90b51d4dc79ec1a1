"""The one tree of errors a user can cause. The CLI prints any of them as one line and exits 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AutorlError(Exception):
    """Base of every error that is the user's to fix; its message says what was wrong and what to do."""


class UsageError(AutorlError):
    """A flag, argument or configuration value is invalid."""


class UnknownNameError(AutorlError):
    """A benchmark, agent or backend name that nothing registers."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known = sorted(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        if close:
            hint = f"did you mean {', '.join(repr(c) for c in close)}?"
        elif known:
            hint = f"known: {', '.join(known)}"
        else:
            hint = "none is installed"
        super().__init__(f"unknown {kind} {name!r}; {hint}")
        self.kind, self.name, self.close_matches = kind, name, close


class PluginConflictError(AutorlError):
    """Two distributions register the same name."""


class MissingDependencyError(AutorlError):
    """An optional dependency is not installed; the message names the pip command."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what} needs an optional dependency that is not installed: run `pip install {install}`")


class ResourceError(AutorlError):
    """A model or data set could not be found, downloaded or read."""


class HiddenDataError(ResourceError):
    """A benchmark's hidden items (or the secret they are drawn with) are not in the given hidden folder."""


class InvalidCheckpointError(AutorlError):
    """A submitted checkpoint is not a loadable, safe model directory."""


class GraderError(AutorlError):
    """The grading service refused a request or could not be reached."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class EvaluationError(AutorlError):
    """An evaluation could not run (as opposed to one item failing, which is recorded on that item)."""
