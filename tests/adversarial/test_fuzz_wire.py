"""Property-based fuzzing of the bytes on the wire: a raw socket server answers each request with a
generated HTTP response (odd status lines, broken framing, lying Content-Length, bad chunking, wrong
Content-Encoding, junk headers, bodies cut short) to the clients on their default transports (httpx's
pool for the sync clients, aiohttp for the async ones). Whatever arrives, a call returns a valid result
or raises a ``wrapper.errors`` exception, nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrapper import Completion, CompletionChunk
from wrapper.errors import APIError

from ._clients import MODELS, new_client
from ._schemas import from_schema, fuzz_settings, mutated, schema

EXAMPLES = 150
fuzz = fuzz_settings(EXAMPLES)
TIMEOUT = 2.0

STATUS_LINES = st.sampled_from(
    [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 200",
        b"HTTP/1.0 200 OK",
        b"HTTP/1.1 201 Created",
        b"HTTP/1.1 204 No Content",
        b"HTTP/1.1 302 Found",
        b"HTTP/1.1 400 Bad Request",
        b"HTTP/1.1 422 Unprocessable Entity",
        b"HTTP/1.1 429 Too Many Requests",
        b"HTTP/1.1 500 Internal Server Error",
        b"HTTP/1.1 999 Nine Nine Nine",
        b"HTTP/1.1 abc Nope",
        b"HTTP/2 200 OK",
        b"HTTX/1.1 200 OK",
        b"garbage",
        b"",
    ]
)
CONTENT_TYPES = st.sampled_from(
    [b"application/json", b"text/event-stream", b"text/html", b"application/json; charset=utf-16", None]
)
JUNK_HEADERS = st.lists(
    st.sampled_from(
        [
            b"Content-Encoding: gzip",
            b"Content-Encoding: deflate",
            b"Content-Encoding: br",
            b"Content-Encoding: zstd",
            b"Content-Encoding: nonsense",
            b"Retry-After: 1e400",
            b"Retry-After: Wed, 21 Oct 2015 07:28:00 GMT",
            b"X-Request-Id: \xff\xfe",
            b"X-Junk: \x80\x81",
            b"No-Colon-Here",
            b": empty-name",
            b"X-Long: " + b"a" * 20_000,
            b"Transfer-Encoding: identity",
        ]
    ),
    max_size=3,
)
FRAMINGS = st.sampled_from(["length", "short", "long", "close", "chunked", "bad-chunked", "both", "cut"])


def _framed(body: bytes, framing: str) -> tuple[list[bytes], bytes]:
    """The framing headers for ``body`` and the bytes sent after the blank line."""
    if framing == "length":
        return [b"Content-Length: %d" % len(body)], body
    if framing == "short":
        return [b"Content-Length: %d" % (len(body) // 2)], body
    if framing == "long":
        return [b"Content-Length: %d" % (len(body) + 100)], body
    if framing == "chunked":
        return [b"Transfer-Encoding: chunked"], b"%x\r\n%s\r\n0\r\n\r\n" % (
            len(body),
            body,
        ) if body else b"0\r\n\r\n"
    if framing == "bad-chunked":
        return [b"Transfer-Encoding: chunked"], b"zz\r\n" + body
    if framing == "both":
        return [b"Content-Length: 3", b"Transfer-Encoding: chunked"], b"%x\r\n%s\r\n0\r\n\r\n" % (
            len(body),
            body,
        )
    if framing == "cut":
        return [b"Content-Length: %d" % len(body)], body[: len(body) // 2]
    return [], body  # "close": the body ends when the connection does


@st.composite
def responses(draw: st.DrawFn, body: st.SearchStrategy[bytes]) -> bytes:
    """A whole HTTP response, as bytes, that may break any rule of HTTP/1.1."""
    content = draw(body)
    framing_headers, payload = _framed(content, draw(FRAMINGS))
    content_type = draw(CONTENT_TYPES)
    # "Connection: close" (and the server closes anyway): no connection is pooled, so each example stands
    # alone and a failure replays the same way.
    headers = [b"Connection: close", *framing_headers, *draw(JUNK_HEADERS)]
    if content_type is not None:
        headers.append(b"Content-Type: " + content_type)
    return b"\r\n".join([draw(STATUS_LINES), *headers, b"", payload])


class RawServer:
    """Answers every request on a local port with ``self.answer``'s bytes, then closes the connection."""

    def __init__(self) -> None:
        self.answer = b""
        self._stop = threading.Event()
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="raw-http", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._socket.settimeout(0.05)
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(TIMEOUT)
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    self._read_request(connection)
                    connection.sendall(self.answer)
                    connection.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    @staticmethod
    def _read_request(connection: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        while len(body) < length:
            chunk = connection.recv(65536)
            if not chunk:
                return
            body += chunk

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


class Clients:
    """Both APIs' clients, sync and async, on their default transports, kept for the whole module.

    Building a client costs ~20 ms (its TLS context), so the examples share them; the async ones live on
    one event loop of their own.
    """

    def __init__(self, port: int) -> None:
        self.urls = {"scale": f"http://127.0.0.1:{port}", "gradient": f"http://127.0.0.1:{port}/api"}
        self.sync = {
            api: new_client(api, url, max_retries=0, timeout=TIMEOUT) for api, url in self.urls.items()
        }
        self.loop = asyncio.Runner()
        self.asynchronous = self.loop.run(self._async_clients())

    async def _async_clients(self) -> dict[str, Any]:
        options = {"asynchronous": True, "max_retries": 0, "timeout": TIMEOUT}
        return {api: new_client(api, url, **options) for api, url in self.urls.items()}

    def close(self) -> None:
        for client in self.sync.values():
            client.close()
        for client in self.asynchronous.values():
            self.loop.run(client.close())
        self.loop.close()


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    server = RawServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def clients(raw: RawServer) -> Iterator[Clients]:
    both = Clients(raw.port)
    yield both
    both.close()


def _check(item: Any) -> None:
    assert isinstance(item, Completion | CompletionChunk)
    assert isinstance(item.text, str)


def _sync(client: Any, api: str, method: str) -> None:
    try:
        if method == "complete":
            _check(client.complete(MODELS[api], "Alice"))
        else:
            for chunk in client.stream(MODELS[api], "Alice"):
                _check(chunk)
    except APIError:
        pass


async def _async(client: Any, api: str, method: str) -> None:
    try:
        if method == "complete":
            _check(await client.complete(MODELS[api], "Alice"))
        else:
            async with contextlib.aclosing(client.stream(MODELS[api], "Alice")) as chunks:
                async for chunk in chunks:
                    _check(chunk)
    except APIError:
        pass


def _run(raw: RawServer, clients: Clients, api: str, method: str, answer: bytes) -> None:
    """Both clients, sync and async, against ``answer``; anything but a result or an ``APIError`` fails."""
    raw.answer = answer
    _sync(clients.sync[api], api, method)
    clients.loop.run(_async(clients.asynchronous[api], api, method))


def _json(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return strategy.map(lambda body: json.dumps(body).encode())


SCALE_BODIES = _json(from_schema(schema("scale.yaml", "CompletionResponse"), "scale.yaml")) | mutated(
    from_schema(schema("scale.yaml", "CompletionResponse"), "scale.yaml")
)
GRADIENT_BODIES = _json(
    from_schema(schema("gradient.json", "CompleteModelSuccess"), "gradient.json")
) | mutated(from_schema(schema("gradient.json", "CompleteModelError"), "gradient.json"))
SSE_BODIES = st.lists(
    _json(from_schema(schema("scale.yaml", "CompletionResponse"), "scale.yaml")).map(
        lambda b: b"data: " + b + b"\n\n"
    )
    | st.sampled_from([b"event: error\ndata: {}\n\n", b": comment\n\n", b"data: {\n\n"]),
    max_size=4,
).map(b"".join)


@fuzz
@given(answer=responses(SCALE_BODIES))
def test_scale_complete_survives_any_bytes(raw: RawServer, clients: Clients, answer: bytes) -> None:
    _run(raw, clients, "scale", "complete", answer)


@fuzz
@given(answer=responses(SSE_BODIES))
def test_scale_stream_survives_any_bytes(raw: RawServer, clients: Clients, answer: bytes) -> None:
    _run(raw, clients, "scale", "stream", answer)


@fuzz
@given(answer=responses(GRADIENT_BODIES))
def test_gradient_complete_survives_any_bytes(raw: RawServer, clients: Clients, answer: bytes) -> None:
    _run(raw, clients, "gradient", "complete", answer)
