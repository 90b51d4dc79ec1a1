"""The selftest's traps for escapes: a Unix socket in a host folder and a TCP listener on a non-loopback address of
this machine, each counting the connections it accepts (a sandboxed agent must reach neither)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Listener", "listeners", "non_loopback_ip"]


def non_loopback_ip() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outbound interface
            ip = str(s.getsockname()[0])
    except OSError:
        try:
            ip = socket.gethostbyname(socket.gethostname())
        except OSError:
            return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


class Listener:
    """A server socket that counts the connections it accepts, in a thread of its own."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.count = 0
        self.sock.settimeout(0.5)
        self.sock.listen(8)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()
        return self.count


@contextmanager
def listeners(folder: Path) -> Iterator[tuple[dict[str, Any], dict[str, Listener]]]:
    found: dict[str, Listener] = {}
    cfg: dict[str, Any] = {"unix": None, "tcp": None}
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(folder / "host.sock"))
    found["unix"], cfg["unix"] = Listener(unix), str(folder / "host.sock")
    ip = non_loopback_ip()
    if ip:
        try:
            tcp = socket.create_server((ip, 0))
        except OSError:
            ip = None
        else:
            found["tcp"], cfg["tcp"] = Listener(tcp), [ip, tcp.getsockname()[1]]
    try:
        yield cfg, found
    finally:
        for listener in found.values():
            listener.close()
