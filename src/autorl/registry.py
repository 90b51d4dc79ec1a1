"""The registry's former path, kept for plugins that import it: :mod:`autorl.plugins.registry` is its home."""

from __future__ import annotations

from autorl.plugins.registry import *  # noqa: F403
from autorl.plugins.registry import __all__ as __all__
