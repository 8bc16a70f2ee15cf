"""The sandbox's server: its listening socket, and uvicorn over h11 with a deadline on each client.

uvicorn waits forever for a request's head: a connection that sends nothing, or its head one byte at a
time, holds a socket and a file descriptor for as long as the client likes (uvicorn's keep-alive timer
only starts after a response, and any byte stops it). ``_Protocol`` closes a connection that keeps the
server waiting ``client_timeout`` seconds for a request's head (from its opening, or from its last
response), or for the rest of a body the app answered without reading. A body the app reads has its
own deadline there (``SandboxApp``), answered 408 in the API's error shape.
"""

from __future__ import annotations

import asyncio
import errno
import socket

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ._app import SandboxApp


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection that keeps the server waiting ``client_timeout`` seconds
    with nothing reading what it sends."""

    client_timeout: float
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def _waiting(self) -> bool:
        """Whether the server waits on the client with nothing reading what it sends: for a request's head,
        or for the rest of a body after the answer."""
        theirs = self.conn.their_state
        return theirs is h11.IDLE or (
            theirs is h11.SEND_BODY and self.conn.our_state is not h11.SEND_RESPONSE
        )

    def _watch(self) -> None:
        """Start the deadline when the server begins to wait (more bytes do not move it), stop it after."""
        if not self._waiting():
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
        elif self._deadline is None and not self.transport.is_closing():
            self._deadline = self.loop.call_later(self.client_timeout, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self._waiting():
            self.transport.close()


def server(app: SandboxApp, host: str, port: int) -> uvicorn.Server:
    """A uvicorn server of ``app`` over h11 (whether httptools is installed or not), with ``app``'s
    ``client_timeout`` on every connection."""
    protocol = type("Protocol", (_Protocol,), {"client_timeout": app.client_timeout})
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        lifespan="off",
        access_log=False,
        log_config=None,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    app.connections = lambda: server.server_state.connections  # type: ignore[assignment, return-value]
    return server


def checked_port(port: int) -> int:
    """``port`` if a TCP port can have that number (0: any free one); else ``ValueError`` giving the range."""
    if not 0 <= port <= 65535:
        raise ValueError(f"must be from 0 to 65535 (0: any free port), not {port}")
    return port


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``; ``OSError`` naming the address when it can't be bound."""
    try:
        checked_port(port)
    except ValueError as exc:
        raise ValueError(f"port {exc}") from None
    # proto=IPPROTO_TCP lets asyncio set TCP_NODELAY on the connections (else Nagle adds 40 ms a request)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        busy = " (the port is busy: another server listens on it; pick another port)"
        why = busy if exc.errno == errno.EADDRINUSE else ""
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}{why}") from None
    return listener
