"""autorl's version, defined here only: ``autorl.__version__``, ``autorl --version`` and every run's record
(``meta.autorl_version``) read it. A literal, so that reading it imports nothing."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
