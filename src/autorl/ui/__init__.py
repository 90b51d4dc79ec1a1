"""``autorl ui``: the results dashboard, a Starlette app over the ledger (see :func:`create_app`)."""

from autorl.ui.app import create_app

__all__ = ["create_app"]
