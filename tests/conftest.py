"""Shared fixtures: a scripted HTTP server on a real socket, client factories, retries that do not wait."""

from __future__ import annotations

import contextlib
import inspect
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from helpers import retry_waits

from wrapper.gradient import AsyncGradient, Gradient
from wrapper.scale import AsyncScale, Scale

SCALE_KEY = "sk-scale-SECRET-0123456789"
GRADIENT_TOKEN = "gr-token-SECRET-9876543210"
CREDENTIALS = {
    "scale": {"api_key": SCALE_KEY, "account_id": "acct-1"},
    "gradient": {"access_token": GRADIENT_TOKEN, "workspace_id": "ws-1"},
}
CLASSES = {"scale": (Scale, AsyncScale), "gradient": (Gradient, AsyncGradient)}
ENV_VARS = (
    "SGP_API_KEY",
    "SGP_ACCOUNT_ID",
    "SGP_CLIENT_BASE_URL",
    "GRADIENT_ACCESS_TOKEN",
    "GRADIENT_WORKSPACE_ID",
    "GRADIENT_API_URL",
)


def scale_body(text: str = "Paris", **extra: Any) -> dict[str, Any]:
    """A Scale ``CompletionResponse`` body completing to ``text``."""
    return {"completions": [["prompt", [text]]], "finish_reason": "stop", **extra}


GRADIENT_BODY = {"finishReason": "stop", "generatedOutput": "yes"}


async def call(result: Any) -> Any:
    """The result of a sync or async client call."""
    return await result if inspect.isawaitable(result) else result


async def collect(stream: Any) -> list[Any]:
    """Every item of a sync or async iterator."""
    if hasattr(stream, "__aiter__"):
        return [item async for item in stream]
    return list(stream)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider settings from the machine running the tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sleeps() -> Iterator[list[float]]:
    """The waits the clients' retries ask for (sync and async): logged, not slept (``wrapper.testing``)."""
    with retry_waits() as waits:
        yield waits


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Run the test with the sync and with the async client."""
    return str(request.param)


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
async def make_client(sleeps: list[float], clean_env: None) -> AsyncIterator[Callable[..., Any]]:
    """``make_client(provider, mode, handler=..., **options)``: a client on a MockTransport (or, with
    ``base_url`` and no handler, on its default transport), closed after the test."""
    opened: list[Any] = []

    def make(provider: str, mode: str, handler: Handler | None = None, **options: Any) -> Any:
        cls = CLASSES[provider][mode == "async"]
        if handler is not None:
            transport = httpx.MockTransport(handler)
            http = (
                httpx.AsyncClient(transport=transport)
                if mode == "async"
                else httpx.Client(transport=transport)
            )
            options.setdefault("http_client", http)
            options.setdefault("base_url", "https://api.test/api")
        client = cls(**{**CREDENTIALS[provider], **options})
        opened.append(client)
        return client

    yield make
    for client in opened:
        await call(client.close())


# --- a scripted HTTP/1.1 server on 127.0.0.1 -------------------------------------------------------

Reply = Callable[["_Handler"], None]


class LocalServer:
    """A threaded HTTP server on a free local port that answers with scripted replies, in order.

    The last reply repeats. ``requests`` records ``(method, path, headers, json body)``;
    ``disconnected`` is set when a client goes away in the middle of a ``hold`` stream.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.replies: list[Reply] = [json_reply(200, scale_body())]
        self.disconnected = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)

    def _next(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many clients connecting at once are queued, not dropped

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out or went away on purpose


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        server: LocalServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.loads(raw) if raw else None
        server.requests.append(
            (self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        server._next()(self)

    def finish(self) -> None:
        with contextlib.suppress(OSError):  # the reply closed or reset the connection on purpose
            super().finish()


def json_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    """Answer ``status`` with ``body`` (JSON unless it is ``bytes``)."""

    def reply(handler: _Handler) -> None:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("content-type", "text/plain" if isinstance(body, bytes) else "application/json")
        handler.send_header("content-length", str(len(content)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(content)

    return reply


def reset_reply(handler: _Handler) -> None:
    """Reset the connection (RST) instead of answering."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


def sse_reply(events: list[str], then: str = "end") -> Reply:
    """Stream ``events`` (each ``"data: ..."`` or ``"event: ...\\ndata: ..."``) as server-sent events.

    ``then``: ``"end"`` finishes the stream; ``"cut"`` drops the connection mid-body; ``"hold"`` keeps
    sending comments until the client goes away (then sets ``server.disconnected``).
    """

    def chunk(handler: _Handler, text: str) -> None:
        data = text.encode()
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()

    def reply(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for event in events:
            chunk(handler, event + "\n\n")
        if then == "end":
            handler.wfile.write(b"0\r\n\r\n")
        elif then == "cut":
            handler.connection.shutdown(socket.SHUT_RDWR)
            handler.close_connection = True
        else:
            deadline = time.monotonic() + 10
            try:
                while time.monotonic() < deadline:
                    chunk(handler, ": keep-alive\n\n")
                    time.sleep(0.01)
            except OSError:
                handler.server.owner.disconnected.set()  # type: ignore[attr-defined]
            handler.close_connection = True

    return reply


@pytest.fixture
def server() -> Iterator[LocalServer]:
    """A ``LocalServer``, stopped after the test."""
    local = LocalServer()
    local.start()
    yield local
    local.stop()
