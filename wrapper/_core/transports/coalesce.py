"""A request's head and body in one write: the sync pool's connections (``sync_pool``).

httpcore writes a request's head and then its body, each on its own: over TLS, two records and two
``send`` calls where one would do, and with ``TCP_NODELAY`` (which httpcore sets) two packets. Python's
``http.client`` sends a small body with its head for this reason (and, without ``TCP_NODELAY``,
to keep Nagle's algorithm from holding the body back until the head's delayed ACK). ``Coalescing``
holds the first write after a read (a request's head) and sends it with the write that follows (its
body), or before the next read (a request without a body).

Only HTTP/1.1 connections are wrapped (the sync pool opens no other): there, a request's writes and
the reads of its response come one after another from one thread.
"""

from __future__ import annotations

import contextlib
import ssl
from types import ModuleType
from typing import Any

import httpcore

__all__ = ["Coalescing"]

_JOIN = 64 * 1024
"""The largest piece of a body sent in one write with the head: a larger one is not copied to join it."""


class Coalescing(httpcore.NetworkStream):
    """httpcore's ``stream`` (``core``'s: httpcore or httpcore2), a request's head sent with its body."""

    def __init__(self, stream: httpcore.NetworkStream, core: ModuleType) -> None:
        self._stream = stream
        self._core = core
        self._head_next = True  # the next write is a request's head
        self._held: bytes | None = None
        self._timeout: float | None = None

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        held, self._held = self._held, None
        if self._head_next:
            self._head_next = False
            self._held, self._timeout = buffer, timeout
            return
        if held is not None:
            if len(buffer) > _JOIN:
                self._stream.write(held, timeout)
            else:
                buffer = held + buffer
        self._stream.write(buffer, timeout)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        held, self._held = self._held, None
        if held is not None:
            # a failed write, as httpcore treats one: read what the server said (an early 413, say)
            with contextlib.suppress(self._core.WriteError):
                self._stream.write(held, self._timeout)
        self._head_next = True
        return self._stream.read(max_bytes, timeout)

    def close(self) -> None:
        self._held = None
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return Coalescing(self._stream.start_tls(ssl_context, server_hostname, timeout), self._core)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)
