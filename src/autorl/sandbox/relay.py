"""Reaching the grader from a sandbox without a network: TCP on loopback <-> a Unix socket.

Outside, :class:`UnixToTcp` (in the orchestrator) listens on a Unix socket in a directory that is bound into
the sandbox and forwards each connection to the grader's TCP port. Inside, ``python -m autorl.sandbox.relay
--port P --socket S -- ARGV...`` listens on ``127.0.0.1:P`` of the sandbox's own loopback, forwards to the
socket, runs ``ARGV`` and exits as it does. The agent sees the same ``GRADING_SERVER_URL`` either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from autorl.procs import wrapper

#: the grader's socket, in the directory bound into the sandbox
SOCKET_NAME = "grader.sock"

Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def _handler(connect: Connect) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await connect()
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


class _LoopThread:
    """An asyncio server on a daemon thread; ``start`` returns once it listens."""

    def __init__(self, serve: Callable[[], Awaitable[asyncio.AbstractServer]]) -> None:
        self._serve = serve
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            try:
                self._server = await self._serve()
            except BaseException as exc:
                self._error = exc
                raise
            finally:
                self._ready.set()

        try:
            self._loop.run_until_complete(main())
            self._loop.run_forever()
        except BaseException:
            pass

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        def close() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        if self._loop.is_running():
            self._loop.call_soon_threadsafe(close)
        self._thread.join(10)


def _bound_unix_socket(path: Path) -> socket.socket:
    """A Unix socket bound at ``path``, however long (a socket address holds about 100 bytes: a longer path
    is reached through a descriptor of its directory)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if len(os.fsencode(path)) < 100:
            sock.bind(str(path))
        else:
            dir_fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
            try:
                sock.bind(f"/proc/self/fd/{dir_fd}/{path.name}")
            finally:
                os.close(dir_fd)
    except BaseException:
        sock.close()
        raise
    return sock


def socket_name_for(port: int) -> str:
    """The socket through which a further loopback port (beside the grader's) is relayed into the sandbox."""
    return f"port-{port}.sock"


class UnixToTcp(_LoopThread):
    """Outside the sandbox: connections to ``socket_path`` go to ``127.0.0.1:port``."""

    def __init__(self, socket_path: Path, port: int) -> None:
        self.socket_path = socket_path

        async def serve() -> asyncio.AbstractServer:
            server = await asyncio.start_unix_server(
                _handler(lambda: asyncio.open_connection("127.0.0.1", port)), sock=_bound_unix_socket(socket_path)
            )
            os.chmod(socket_path, 0o600)
            return server

        super().__init__(serve)


class TcpToUnix(_LoopThread):
    """Inside the sandbox: connections to ``127.0.0.1:port`` go to ``socket_path``."""

    def __init__(self, port: int, socket_path: str) -> None:
        async def serve() -> asyncio.AbstractServer:
            return await asyncio.start_server(
                _handler(lambda: asyncio.open_unix_connection(socket_path)), host="127.0.0.1", port=port
            )

        super().__init__(serve)


#: What ``python -c`` runs for the relay inside the sandbox. ``python -m autorl.sandbox.relay`` made runpy warn on
#: stderr, the first line of every agent's log, that the package (``autorl.sandbox``, which imports this module
#: for its socket names) had imported the module before running it as ``__main__``
RELAY_MAIN = "import sys; from autorl.sandbox.relay import main; sys.exit(main())"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autorl.sandbox.relay")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="PORT=SOCKET",
        help="a further port relayed to a socket (the LLM gateway's)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = wrapper.command_after(parser, args.command)
    relay = TcpToUnix(args.port, args.socket)
    relay.start()
    for spec in args.also:
        port, _, path = spec.partition("=")
        TcpToUnix(int(port), path).start()  # daemon threads: they end with this process
    proc = wrapper.start(command)
    if proc is None:
        return 127
    # the relay outlives a SIGTERM to the process group so that the agent can still submit in its grace
    # period; SIGKILL ends it with the rest
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = proc.wait()
    relay.stop()
    return wrapper.end_as(code)  # die the way the agent died, so that the run records it


if __name__ == "__main__":
    sys.exit(main())
