"""A job a run does in the background every few seconds (the watcher of the agent's files, the printer of
scores) on a daemon thread, until it is stopped."""

from __future__ import annotations

import contextlib
import threading
from typing import Self


class Ticker:
    """Calls :meth:`tick` every ``interval`` seconds from :meth:`start` until :meth:`stop`; a tick that raises is
    tried again at the next one (a slow or restarting grader, a listing that failed)."""

    def __init__(self, name: str, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def tick(self) -> object:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """No more ticks; waits up to ``timeout`` s for the one in progress."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):
                self.tick()
