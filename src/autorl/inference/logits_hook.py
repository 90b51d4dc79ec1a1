"""The ``hf`` backend's ``logits_processor`` option: a user's ``(prompt_ids_per_row, step, logits) -> logits``
callable, named in the backend's identity by its code and the state it carries (:func:`callable_identity`, so a
cached score is never reused for another hook), and adapted to transformers' LogitsProcessor protocol
(:class:`PromptLogitsProcessor`) for ``generate``; the compacting decoder calls it directly.
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

__all__ = ["PromptLogitsProcessor", "callable_identity"]


def callable_identity(fn: Any) -> dict[str, str]:
    """What names a Python callable in a config hash: its qualified name, its code and the state it carries.

    The state (defaults, closure values, an object's attributes) enters as its ``repr``; one holding objects
    whose ``repr`` is their address gives a new hash per process, so a cached score is never reused for it.
    """
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn)
    name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"
    try:
        code = inspect.getsource(target)
    except (OSError, TypeError):
        raw = getattr(getattr(fn, "__code__", None), "co_code", b"")
        code = raw.hex() if raw else repr(fn)
    func = getattr(fn, "__func__", fn)
    cells = [c.cell_contents for c in (getattr(func, "__closure__", None) or ()) if _cell_filled(c)]
    state = [getattr(func, "__defaults__", None), getattr(func, "__kwdefaults__", None), cells]
    if not inspect.isfunction(fn) and not inspect.ismethod(fn):
        state.append(sorted(vars(fn).items()) if hasattr(fn, "__dict__") else repr(fn))
    if inspect.ismethod(fn):
        state.append(repr(fn.__self__))
    digest = hashlib.sha256(code.encode() + b"\0" + repr(state).encode()).hexdigest()[:16]
    return {"name": name, "hash": digest}


def _cell_filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


class PromptLogitsProcessor:
    """Adapts a ``(prompt_ids_per_row, step, logits)`` callable to transformers' LogitsProcessor protocol."""

    def __init__(self, fn: Any, pad_id: int) -> None:
        self.fn, self.pad_id = fn, pad_id
        self.width: int | None = None
        self.prompts: list[list[int]] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.width is None:
            self.width = int(input_ids.shape[1])
            self.prompts = [[t for t in row if t != self.pad_id] for row in input_ids.tolist()]
        return self.fn(self.prompts, int(input_ids.shape[1]) - self.width, scores)
