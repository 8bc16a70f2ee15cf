"""The sync clients' transport: each request borrows a connection of its own from a free list.

httpcore's sync pool hands out connections under one lock, scanning every connection for every
queued request. With a couple of hundred threads on one client, a request waited seconds for its
turn (``make bench``, row "sync complete_many in flight"). Here a request takes a whole
``httpx.HTTPTransport`` that holds one keep-alive connection, and gives it back when its response
is closed: a constant-time step. It is still httpx's own transport underneath, so mocks (respx,
pytest-httpx) and instrumentations (OpenTelemetry's httpx) see every request as before.

A connection whose response left bytes after it (``reuse``) is closed when given back, never kept.
Idle connections are swept once a second, off the requests' path (``timers``): those the server
closed, or idle for longer than ``limits.keepalive_expiry``, are closed and dropped, so no socket is
left half-closed (CLOSE-WAIT) after a burst, however long the client then stays idle.

In a forked child the connections taken from the parent are dropped (``fork``). A host
name is looked up within the connect timeout (``_Lookups``), as the async transports do, and each
connection sends a request's head with its body in one write (``Coalescing``). On httpx2
(``library``), each connection is an ``httpx2.HTTPTransport`` and "httpcore" reads httpcore2.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import ipaddress
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

from . import fork
from .library import HTTPX, Http, also, core
from .timers import TIMERS, Timer

if TYPE_CHECKING:
    import ssl

__all__ = ["CheckoutTransport"]

_SWEEP = 1.0
"""Seconds between two sweeps of a pool's idle connections (while it has any)."""


class CheckoutTransport(httpx.BaseTransport):
    """Connections taken most-recently-used first; ``limits`` as in httpx.

    ``max_connections`` bounds the requests in flight (a request over it waits up to the pool
    timeout, then raises ``httpx.PoolTimeout``); ``max_keepalive_connections`` bounds the idle ones kept.
    """

    def __init__(self, limits: httpx.Limits, verify: ssl.SSLContext, library: Http = HTTPX) -> None:
        self._one = httpx.Limits(
            max_connections=1, max_keepalive_connections=1, keepalive_expiry=limits.keepalive_expiry
        )
        self._verify = verify
        self._library = library
        self._give_back_class = also(_GiveBackOnClose, library.SyncByteStream)
        self._lookups = _lookups(library)
        self._max_busy = limits.max_connections
        self._max_idle = limits.max_keepalive_connections
        self._idle: list[httpx.HTTPTransport] = []
        self._busy = 0
        self._closed = False
        self._changed = threading.Condition()
        self._next_sweep: Timer | None = None  # of the idle connections, while there are any
        fork.register(self)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        transport = self._take(request.extensions.get("timeout", {}).get("pool"))
        pid = fork.pid  # the process it was taken in
        try:
            response = transport.handle_request(request)
        except BaseException:
            self._give_back(transport, pid)
            raise
        assert isinstance(response.stream, self._library.SyncByteStream)
        response.stream = self._give_back_class(response.stream, lambda: self._give_back(transport, pid))
        return response

    def after_fork(self) -> None:
        """In a forked child: close the parent's idle connections (a plain close sends nothing while
        the parent holds the socket) and forget its busy ones."""
        self._changed = threading.Condition()  # a thread of the parent may have held it at the fork
        self._busy = 0
        self._next_sweep = None  # the parent's
        idle, self._idle = self._idle, []
        for transport in idle:
            transport.close()

    def close(self) -> None:
        """Close the idle connections now, and each busy one when its response is closed."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._changed.notify_all()
        for transport in idle:
            transport.close()

    def _take(self, timeout: float | None) -> httpx.HTTPTransport:
        with self._changed:
            limit = self._max_busy
            if limit is not None and not self._changed.wait_for(
                lambda: self._closed or self._busy < limit, timeout
            ):
                raise self._library.PoolTimeout(
                    f"no connection was free within the pool timeout ({timeout} s)"
                )
            if self._closed:
                raise RuntimeError("Cannot send a request, as the client has been closed.")
            self._busy += 1
            if self._idle:
                return self._idle.pop()
        transport = self._library.HTTPTransport(verify=self._verify, limits=self._one)
        transport._pool._network_backend = self._lookups  # httpx takes no backend; its pool hands this on
        return transport

    def _give_back(self, transport: httpx.HTTPTransport, pid: int) -> None:
        with self._changed:
            keep = pid == fork.pid  # else taken by the parent before a fork: closed, never kept
            if keep:
                self._busy -= 1
                self._changed.notify()
                keep = (
                    not self._closed
                    and (self._max_idle is None or len(self._idle) < self._max_idle)
                    and _clean(transport)
                )
                if keep:
                    self._idle.append(transport)
                    if self._next_sweep is None:
                        self._sweep_later()
        if not keep:
            transport.close()

    def _sweep_later(self) -> None:
        """Schedule the next sweep (with ``_changed`` held); it holds no reference to the pool."""
        self._next_sweep = TIMERS.at(time.monotonic() + _SWEEP, functools.partial(_sweep, weakref.ref(self)))

    def _sweep_idle(self) -> None:
        """Close the idle connections that the server closed or that expired; sweep again in a second
        while some are left."""
        with self._changed:
            self._next_sweep = None
            idle = list(self._idle)
        stale = {id(transport) for transport in idle if _expired(transport)}
        with self._changed:  # those still idle: one may have been taken meanwhile
            dropped = [transport for transport in self._idle if id(transport) in stale]
            if dropped:
                self._idle = [transport for transport in self._idle if id(transport) not in stale]
            if self._idle and self._next_sweep is None and not self._closed:
                self._sweep_later()
        for transport in dropped:
            transport.close()


def _sweep(pool: weakref.ref[CheckoutTransport]) -> None:
    live = pool()
    if live is not None:
        live._sweep_idle()


def _expired(transport: httpx.HTTPTransport) -> bool:
    """Whether an idle transport's connection is of no more use: closed, idle for longer than the
    keep-alive expiry (httpcore's ``has_expired``), or closed by the server (its socket readable while
    idle: httpcore's ``has_expired`` says so too, httpcore2's only checks it when a request comes)."""
    return all(
        connection.is_closed() or connection.has_expired() or _readable_while_idle(connection)
        for connection in transport._pool.connections
    )


def _clean(transport: httpx.HTTPTransport) -> bool:
    """False if h11 read past the end of the last response on ``transport``'s connection: the next
    request on it would read those bytes as its answer (``reuse``)."""
    for connection in transport._pool.connections:
        state = getattr(getattr(connection, "_connection", None), "_h11_state", None)
        if state is not None and state.trailing_data[0]:
            return False
    return True


def _readable_while_idle(connection: object) -> bool:
    """True if ``connection`` (httpcore's) is idle and its socket readable: the server closed it."""
    http11 = getattr(connection, "_connection", None)  # None before it connects, or on HTTP/2
    stream = getattr(http11, "_network_stream", None)
    idle = getattr(http11, "is_idle", None)
    return stream is not None and idle is not None and idle() and bool(stream.get_extra_info("is_readable"))


class _GiveBackOnClose(httpx.SyncByteStream):
    """A response's body that hands its connection back once closed (only once)."""

    def __init__(self, stream: httpx.SyncByteStream, give_back: Callable[[], None]) -> None:
        self._stream = stream
        self._give_back: Callable[[], None] | None = give_back

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._stream)  # not a generator of its own: no extra step per chunk of a stream

    def close(self) -> None:
        give_back, self._give_back = self._give_back, None
        try:
            self._stream.close()
        finally:
            if give_back is not None:
                give_back()


class _Lookups(httpcore.NetworkBackend):
    """httpcore's sockets (``httpcore``'s: httpcore2's on httpx2), with a host name looked up within the
    connect timeout.

    ``socket.create_connection`` waits for the system's resolver as long as it takes: a lookup of 8 s
    outlasted a connect timeout of 1 s, and a deadline of 2 s. Here the lookup runs in a thread of its
    own, waited for up to the timeout, and what is left of it goes to connecting to each address.
    """

    def __init__(self, core_module: Any) -> None:
        self._errors = core_module
        self._sockets: httpcore.SyncBackend = core_module.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        return Coalescing(self._connect(host, port, timeout, local_address, socket_options), self._errors)

    def _connect(
        self,
        host: str,
        port: int,
        timeout: float | None,
        local_address: str | None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None,
    ) -> httpcore.NetworkStream:
        connect = self._sockets.connect_tcp
        if timeout is None or _is_address(host):
            return connect(host, port, timeout, local_address, socket_options)
        deadline = time.monotonic() + timeout
        failed: httpcore.ConnectError | None = None
        for address in _lookup(host, port, timeout, self._errors):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                return connect(address, port, left, local_address, socket_options)
            except self._errors.ConnectError as exc:  # the next address, as socket.create_connection does
                failed = exc
        if failed is not None:
            raise failed
        raise self._errors.ConnectTimeout(f"connecting to {host} took longer than {timeout:g} s")

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        return Coalescing(self._sockets.connect_unix_socket(path, timeout, socket_options), self._errors)

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


@functools.cache
def _lookups(library: Http) -> _Lookups:
    """The ``_Lookups`` of ``library``'s httpcore (one each: it keeps no state)."""
    return _Lookups(core(library))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _lookup(host: str, port: int, timeout: float, errors: Any) -> list[str]:
    """The addresses of ``host``, from the system's resolver in a thread waited for up to ``timeout`` s."""
    found: concurrent.futures.Future[list[str]] = concurrent.futures.Future()

    def look_up() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except Exception as exc:
            found.set_exception(exc)
        else:
            found.set_result(list(dict.fromkeys(str(info[4][0]) for info in infos)))

    threading.Thread(target=look_up, name=f"lookup {host}", daemon=True).start()
    try:
        return found.result(timeout)
    except TimeoutError:
        raise errors.ConnectTimeout(f"looking up {host} took longer than {timeout:g} s") from None
    except OSError as exc:  # not found, no network
        raise errors.ConnectError(str(exc)) from exc


_JOIN = 64 * 1024
"""The largest piece of a body sent in one write with the head: a larger one is not copied to join it."""


class Coalescing(httpcore.NetworkStream):
    """httpcore's ``stream`` (``core``'s: httpcore or httpcore2), a request's head sent with its body.

    httpcore writes a request's head and then its body, each on its own: over TLS, two records and two
    ``send`` calls where one would do, and with ``TCP_NODELAY`` (which httpcore sets) two packets.
    Python's ``http.client`` sends a small body with its head for this reason (and, without
    ``TCP_NODELAY``, to keep Nagle's algorithm from holding the body back until the head's delayed
    ACK); aiohttp holds a request's head until its body too. Here the first write after a read (a
    request's head) is held and sent with the write that follows (its body), or before the next read
    (a request without a body). The pool opens HTTP/1.1 connections only: there, a request's writes
    and the reads of its response come one after another from one thread.
    """

    def __init__(self, stream: httpcore.NetworkStream, core: Any) -> None:
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
