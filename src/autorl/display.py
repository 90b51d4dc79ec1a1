"""How numbers read on a screen: the one rule for p-values, intervals and signed differences.

The command line, the dashboard and a notebook's ``repr`` all print through these functions, so one p-value
reads the same everywhere (``4.7e-06``, ``0.032``, ``<1e-300``). Files (CSV, JSON) keep full precision instead.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_ci", "fmt_p", "fmt_signed", "is_number"]

#: below this a p-value is shown as a bound: a double cannot tell such values apart from each other
P_FLOOR = 1e-300


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def fmt_p(p: Any) -> str:
    """A p-value: two significant digits, scientific below a thousandth, ``<1e-300`` at the floor, ``-`` for none.

    >>> fmt_p(4.65e-06), fmt_p(0.0321), fmt_p(0.0), fmt_p(None)
    ('4.7e-06', '0.032', '<1e-300', '-')
    """
    if not is_number(p) or p < 0:
        return "-"
    if p < P_FLOOR:
        return f"<{P_FLOOR:.0e}"
    if p < 1e-3:
        return f"{p:.1e}"
    return f"{p:.2g}"


def fmt_signed(value: Any, digits: int = 1) -> str:
    """A difference with its sign (``+2.5``), ``-`` for none."""
    return f"{value:+.{digits}f}" if is_number(value) else "-"


def fmt_ci(ci: Any, digits: int = 1) -> str:
    """An interval of differences (``[+0.5, +4.1]``), ``-`` unless it is a pair of numbers."""
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(is_number(v) for v in ci):
        return f"[{ci[0]:+.{digits}f}, {ci[1]:+.{digits}f}]"
    return "-"
