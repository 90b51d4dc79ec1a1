"""The one tree of errors a user can cause. The CLI prints any of them as one line and exits 2; the grading API
answers any of them with ``{"error": message}`` and the class's ``http_status``."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import ClassVar


class AutorlError(Exception):
    """Base of every error that is the user's to fix; its message says what was wrong and what to do."""

    #: the status the grading API answers this error with
    http_status: ClassVar[int] = 400


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


class PluginTypeError(AutorlError, TypeError):
    """A plugin registers something that is not a subclass of its kind's base class."""


def extra_install(extra: str) -> str:
    """What to pass ``pip install`` for one of autorl's extras (``hf``, ``train``): through ``constraints.txt``,
    which pins torch to the build the project is tested with (pip would otherwise pull whichever CUDA build
    is newest)."""
    return f"-c constraints.txt 'autorl[{extra}]'"


class MissingDependencyError(AutorlError):
    """An optional dependency is not installed; the message names the pip command."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what} needs an optional dependency that is not installed: run `pip install {install}`")


class ResourceError(AutorlError):
    """A model or data set could not be found, downloaded or read."""


class HiddenDataError(ResourceError):
    """A benchmark's hidden items (or the secret they are drawn with) are not in the given hidden folder."""


class InvalidCheckpointError(AutorlError):
    """A submitted checkpoint is not a loadable, safe model directory (HTTP 422)."""

    http_status = 422


class CheckpointTooLarge(InvalidCheckpointError):
    """The checkpoint (or one of its files) is over a limit (HTTP 413)."""

    http_status = 413


class PathRefused(UsageError):
    """A submitted path names something outside the run's output directory, or a link (HTTP 400)."""

    #: the refusal kind recorded for it, which the audit flags
    kind: ClassVar[str] = "refused_outside_output"


class GraderError(AutorlError):
    """The grading service refused a request or could not be reached.

    ``status`` is the HTTP status the grader answered (client side) or is to answer (server side); when it is
    given it takes the place of ``http_status``.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RunClosed(AutorlError):
    """The run no longer takes submissions (HTTP 409)."""

    http_status = 409


#: the kinds of limit a :class:`LimitReached` names (a run's :class:`~autorl.runs.spec.Limits`: its time, its
#: submissions, its LLM budget in tokens and in US dollars; and the bytes its agent may write)
TIME, SUBMISSIONS, TOKENS, USD, OUTPUT_BYTES = "time", "submissions", "tokens", "usd", "output_bytes"
LIMIT_KINDS = (TIME, SUBMISSIONS, TOKENS, USD, OUTPUT_BYTES)


class LimitReached(AutorlError):
    """One of a run's limits (:class:`autorl.runs.spec.Limits`) is reached; ``kind`` names which (one of
    :data:`LIMIT_KINDS`). The grading API answers it with HTTP 429 (a kind of its own may answer another:
    :class:`autorl.grader.quota.QuotaExceeded`)."""

    http_status = 429

    def __init__(self, message: str, kind: str = SUBMISSIONS) -> None:
        super().__init__(message)
        self.kind = kind


class BudgetSpent(LimitReached):
    """The run's LLM budget cannot pay for a call: no further model calls in this run (``kind``: ``tokens`` or
    ``usd``). The gateway raises it for its meter (answered 429 ``llm_budget_exhausted``); an agent's loop raises it
    when the gateway answers so."""

    def __init__(self, message: str, kind: str = TOKENS) -> None:
        super().__init__(message, kind)


def budget_kind(message: str) -> str:
    """Which LLM budget a gateway's refusal names (:data:`TOKENS` or :data:`USD`), from its message."""
    return TOKENS if "token budget" in message else USD


class QueueFull(AutorlError):
    """Too many submissions are waiting (HTTP 503)."""

    http_status = 503


class NotFound(AutorlError):
    """No such submission (HTTP 404)."""

    http_status = 404


def http_status(exc: AutorlError) -> int:
    """The HTTP status the grading API answers ``exc`` with."""
    if isinstance(exc, GraderError) and exc.status:
        return exc.status
    return exc.http_status


class EvaluationError(AutorlError):
    """An evaluation could not run (as opposed to one item failing, which is recorded on that item)."""
