"""Helpers shared by test modules (``from helpers import ...``): the specs as tests read them; retry waits."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import re
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import tomllib
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import yaml
from normalize import HTTP_METHODS, normalize, pascal_case, snake_case, variant_tag
from overrides import APIS

from wrapper import testing
from wrapper.errors import ContentFlaggedError
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

ROOT = Path(__file__).resolve().parents[1]
SPEC_FILES = {"gradient": ROOT / "specs" / "gradient.json", "scale": ROOT / "specs" / "scale.yaml"}
TEST_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
"""What a client a test builds without a ``timeout`` gets (conftest.py): a stuck request fails its test."""
NO_SUCH_NAME = "zz_no_spec_has_this_name"  # an unknown keyword, key or field in any spec


def result_schema() -> dict[str, Any]:
    """The JSON Schema of a result line, as docs/batches.md publishes it: the first ``json`` block of its
    "The results format" section."""
    page = (ROOT / "docs" / "batches.md").read_text(encoding="utf-8")
    section = page.split("\n## The results format\n", 1)[1]
    block = re.search(r"^```json\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert block is not None, "docs/batches.md's results format has no JSON Schema"
    schema: dict[str, Any] = json.loads(block[1])
    return schema


def tracked_copy(dest: Path, *, symlinks: bool = True) -> Path:
    """The checkout's tracked files copied into ``dest``, as ``git clone`` gives them: a symlink stays one,
    or with ``symlinks=False`` is a small file holding its target, as where Git's ``core.symlinks`` is off
    (Git for Windows' default)."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_symlink() and not symlinks:
            (dest / name).write_text(os.readlink(ROOT / name))
        else:
            shutil.copy2(ROOT / name, dest / name, follow_symlinks=False)
    return dest


def installed_top_level(wheel: Path) -> set[str]:
    """The top-level names a wheel installs into site-packages (its ``.dist-info`` aside)."""
    with zipfile.ZipFile(wheel) as archive:
        roots = {name.partition("/")[0] for name in archive.namelist()}
    return {root for root in roots if not root.endswith(".dist-info")}


def install_command(extra: str) -> re.Pattern[str]:
    """What an error says to install ``extra``: ``pip install`` and each package pyproject.toml's extra
    lists, quoted (any version bounds), as none of the pages' ``completion-clients[extra]`` would install."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = [re.match(r"[\w.-]+(\[[^\]]*\])?", requirement)[0] for requirement in extras[extra]]
    return re.compile("pip install " + " ".join(f"'{re.escape(name)}[^']*'" for name in names))


def raw_spec(api: str) -> dict[str, Any]:
    """The spec as published in specs/."""
    text = SPEC_FILES[api].read_text()
    return json.loads(text) if SPEC_FILES[api].suffix == ".json" else yaml.safe_load(text)


def spec(api: str) -> dict[str, Any]:
    """The normalised spec (what regen generates from)."""
    return normalize(raw_spec(api))


def resolve(doc: dict[str, Any], schema: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def non_null(doc: dict[str, Any], schema: Any) -> Any:
    """The schema a nullable wrapper holds (3.0 ``allOf``+``nullable``, 3.1 ``anyOf`` with null)."""
    schema = resolve(doc, schema)
    for keyword in ("allOf", "anyOf", "oneOf"):
        parts = [p for p in schema.get(keyword, []) if p != {"type": "null"}]
        if len(parts) == 1 and len(schema[keyword]) <= 2:
            return non_null(doc, parts[0])
    if isinstance(schema.get("type"), list):
        return {**schema, "type": next(t for t in schema["type"] if t != "null")}
    return schema


def operation(doc: dict[str, Any], api: str) -> dict[str, Any]:
    wanted = APIS[api].operation
    return next(
        item[m]
        for item in doc["paths"].values()
        for m in HTTP_METHODS
        if item.get(m, {}).get("operationId") == wanted
    )


def body_schema(doc: dict[str, Any], api: str) -> dict[str, Any]:
    schema: dict[str, Any] = resolve(
        doc, operation(doc, api)["requestBody"]["content"]["application/json"]["schema"]
    )
    return schema


def keyword_schemas(api: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Per keyword argument the client should take: its wire field and the schema its value must meet."""
    doc, choices = spec(api), APIS[api]
    reshaped = {r.field: (keyword, r.into) for keyword, r in choices.reshapes.items()}
    found = {}
    for name, schema in body_schema(doc, api)["properties"].items():
        if name == choices.prompt or name in choices.hidden:
            continue
        if name in reshaped:
            keyword, into = reshaped[name]
            found[keyword] = (name, non_null(doc, non_null(doc, schema)["properties"][into]))
        else:
            found[snake_case(name)] = (name, non_null(doc, schema))
    return found


def sample(doc: dict[str, Any], schema: Any) -> Any:
    """A value that meets ``schema`` (every property given)."""
    schema = non_null(doc, schema)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low = schema.get("exclusiveMinimum", schema.get("minimum"))
        low = (low if not isinstance(low, bool) else schema["minimum"]) if low is not None else 0
        high = schema.get("exclusiveMaximum", schema.get("maximum"))
        high = (high if not isinstance(high, bool) else schema["maximum"]) if high is not None else low + 2
        return (low + high) // 2 if kind == "integer" else (low + high) / 2
    if kind == "string":
        return "x" * max(schema.get("minLength", 1), 1)
    if kind == "boolean":
        return True
    if kind == "array":
        return [sample(doc, schema.get("items", {}))] * max(schema.get("minItems", 1), 1)
    if "properties" in schema:
        return {key: sample(doc, sub) for key, sub in schema["properties"].items()}
    if kind == "object":
        extra = schema.get("additionalProperties")
        return {"key": sample(doc, extra) if isinstance(extra, dict) and extra else "value"}
    return "value"


def error_variants(api: str = "gradient") -> dict[str, tuple[str, dict[str, Any]]]:
    """Each tagged error body of the operation's errors: tag -> (its schema's name, the schema)."""
    doc = spec(api)
    found = {}
    for status, response in operation(doc, api)["responses"].items():
        if status.startswith("2"):
            continue
        for media in response.get("content", {}).values():
            union = resolve(doc, media["schema"])
            for member in union.get("oneOf") or union.get("anyOf") or []:
                tag = variant_tag(resolve(doc, member))
                if tag is not None:
                    found[tag[1]] = (member["$ref"].rsplit("/", 1)[1], resolve(doc, member))
    return found


def error_class_name(tag: str) -> str:
    """The name the override table gives a tag's exception, else ``<Tag>Error``."""
    name = APIS["gradient"].error_names.get(tag) or pascal_case(tag)
    return name if name.endswith("Error") else name + "Error"


class _RetryWaits(logging.Handler):
    """Collects the delay of each ``retrying ... in %.2fs`` record the clients log at INFO."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.waits: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and str(record.msg).startswith("retrying "):
            self.waits.append(float(record.args[2]))  # type: ignore[arg-type]


@contextmanager
def retry_waits() -> Iterator[list[float]]:
    """Testing mode on (retries do not wait), and the waits they would have had, read from the log."""
    logger = logging.getLogger("wrapper")
    handler, level, was_testing = _RetryWaits(), logger.level, testing.is_testing()
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    testing.set_testing(True)
    try:
        yield handler.waits
    finally:
        testing.set_testing(was_testing)
        logger.setLevel(level)
        logger.removeHandler(handler)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def batch_threads() -> list[threading.Thread]:
    """The live worker threads of sync ``complete_many`` batches."""
    return [t for t in threading.enumerate() if t.name.startswith("complete_many")]


class Held:
    """A scripted reply that holds each request until ``release()`` (or 10 s), then answers with ``reply``.

    ``held`` counts the requests waiting now; ``answered`` those answered after being held.
    """

    def __init__(self, reply: Callable[[Any], None]) -> None:
        self._reply = reply
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        self.answered = 0

    def release(self) -> None:
        self._release.set()

    def __call__(self, handler: Any) -> None:
        with self._lock:
            self.held += 1
        self._release.wait(10)
        with self._lock:
            self.held -= 1
            self.answered += 1
        self._reply(handler)


@contextlib.contextmanager
def fast_server(delay: float) -> Iterator[str]:
    """The bench's bare asyncio server (``scripts/bench/server.py``) in a child process: its URL.

    It answers both APIs from fixed bodies after ``delay`` seconds, thousands of requests a second.
    """
    command = [
        sys.executable,
        str(ROOT / "scripts" / "bench" / "server.py"),
        "--chunks",
        "2",
        "--delay",
        str(delay),
    ]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        yield f"http://127.0.0.1:{int(process.stdout.readline())}"
    finally:
        process.stdin.close()  # the server stops when its stdin closes
        process.wait(timeout=10)
        process.stdout.close()


_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms")


@contextmanager
def request_id_proxy(upstream: str) -> Iterator[tuple[str, dict[str, bytes]]]:
    """A proxy to ``upstream`` that gives each answer an ``x-request-id``: yields its URL, and the
    request body sent under each id (filled in as requests come)."""
    issued: dict[str, bytes] = {}
    lock = threading.Lock()
    client = httpx.Client(base_url=upstream, timeout=10)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = client.request(self.command, self.path, content=body, headers=headers)
            with lock:
                request_id = f"req-{len(issued)}"
                issued[request_id] = body
            self.send_response(answer.status_code)
            for name in _KEPT_HEADERS:
                if name in answer.headers:
                    self.send_header(name, answer.headers[name])
            self.send_header("x-request-id", request_id)
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", issued
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        client.close()


@contextmanager
def arrivals(sb: Sandbox) -> Iterator[list[float]]:
    """The ``time.monotonic()`` at which each vendor-route request reached ``sb``, while in the block."""
    times: list[float] = []
    counter = sb.app.counter
    enter = counter.enter

    def record() -> None:
        times.append(time.monotonic())
        enter()

    counter.enter = record  # type: ignore[method-assign]
    try:
        yield times
    finally:
        del counter.enter  # the class's own method again


def most_in_any_window(times: list[float], per_second: float) -> float:
    """How far the busiest stretch of ``times`` went over ``per_second``: max over i <= j of
    ``(j - i + 1) - per_second * (times[j] - times[i])``, the burst a limiter must have allowed."""
    ordered = sorted(times)
    return max(
        (j - i + 1) - per_second * (ordered[j] - ordered[i])
        for i in range(len(ordered))
        for j in range(i, len(ordered))
    )


# --- credentials, bodies and a scripted HTTP/1.1 server on 127.0.0.1 ----------------------------------

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


def sse_data(text: str, **extra: Any) -> str:
    """A Scale stream event (``sse_reply``'s) carrying the chunk ``text``; ``extra`` adds fields."""
    return "data: " + json.dumps({"completions": [["prompt", [text]]], **extra})


GRADIENT_BODY = {"finishReason": "stop", "generatedOutput": "yes"}


LIBRARY_ENV = "COMPLETION_CLIENTS_HTTP"


def http_library() -> ModuleType:
    """The HTTP library of the clients' own pools in this test (``COMPLETION_CLIENTS_HTTP``, which the
    ``library`` fixture sets): httpx, or httpx2."""
    return importlib.import_module(os.environ.get(LIBRARY_ENV) or "httpx")


def mock_transport(http: ModuleType, handler: Callable[[Any], Any]) -> Any:
    """``http.MockTransport`` answering with ``handler``, which is written with httpx's classes: on httpx2,
    the responses it returns, their bodies and the exceptions it raises (or its bodies raise) become
    httpx2's classes of the same names, so one handler serves both libraries' tests."""
    if http is httpx:
        return httpx.MockTransport(handler)

    def translated(request: Any) -> Any:
        try:
            response = handler(request)
        except httpx.HTTPError as exc:
            raise _translated_error(http, exc) from exc
        return http.Response(
            response.status_code,
            headers=response.headers.raw,
            stream=_translated_stream(http, response.stream),
            extensions=response.extensions,
        )

    return http.MockTransport(translated)


def _translated_error(http: ModuleType, exc: httpx.HTTPError) -> Exception:
    error: Exception = getattr(http, type(exc).__name__)(str(exc))
    return error


def _translated_stream(http: ModuleType, stream: Any) -> Any:
    """An httpx body as ``http``'s (both sync and async), raising ``http``'s exceptions."""

    class Stream(http.SyncByteStream, http.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __iter__(self) -> Iterator[bytes]:
            try:
                yield from stream
            except httpx.HTTPError as exc:
                raise _translated_error(http, exc) from exc

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in stream:
                    yield chunk
            except httpx.HTTPError as exc:
                raise _translated_error(http, exc) from exc

        def close(self) -> None:
            stream.close()

        async def aclose(self) -> None:
            await stream.aclose()

    return Stream()


async def call(result: Any) -> Any:
    """The result of a sync or async client call."""
    return await result if inspect.isawaitable(result) else result


async def collect(stream: Any) -> list[Any]:
    """Every item of a sync or async iterator."""
    if hasattr(stream, "__aiter__"):
        return [item async for item in stream]
    return list(stream)


async def drain(stream: Any, received: list[str]) -> None:
    """Append each chunk's text to ``received`` as it arrives, until the stream ends or raises."""
    if hasattr(stream, "__aiter__"):
        async for chunk in stream:
            received.append(chunk.text)
    else:
        received.extend(chunk.text for chunk in stream)


async def final(stream: Any) -> Any:
    """``stream.get_final_completion()`` of a sync or async stream."""
    return await call(stream.get_final_completion())


Handler = Callable[[httpx.Request], httpx.Response]


Reply = Callable[["_Handler"], None]


class LocalServer:
    """A threaded HTTP server on a free local port that answers with scripted replies, in order.

    The last reply repeats. ``requests`` records ``(method, path, headers, json body)``;
    ``disconnected`` is set when a client goes away in the middle of a ``hold`` stream.
    """

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.replies: list[Reply] = [json_reply(200, scale_body())]
        self.disconnected = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        if tls is not None:  # https://, with the certificate ``tls`` holds
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        scheme = "https" if isinstance(self._server.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host!s}:{port}"

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
    disable_nagle_algorithm = True  # a reply's headers and body are two writes: no 40 ms wait between
    body: Any = None
    """The request's JSON body (None if it had none), for a reply that answers with what it was asked."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        server: LocalServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.loads(raw) if raw else None
        self.body = body
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


def echo_reply(handler: _Handler) -> None:
    """Answer a Scale completion with its own prompt (as server-sent events if it asked to stream)."""
    prompt = handler.body["prompt"]
    if handler.body.get("stream"):
        events = [{"completions": [["p", [prompt]]]}, {"completions": [["p", [""]]], "finish_reason": "stop"}]
        content = b"".join(b"data: %s\n\n" % json.dumps(event).encode() for event in events)
        content_type = "text/event-stream"
    else:
        content = json.dumps({"completions": [["p", [prompt]]], "finish_reason": "stop"}).encode()
        content_type = "application/json"
    handler.send_response(200)
    handler.send_header("content-type", content_type)
    handler.send_header("content-length", str(len(content)))
    handler.end_headers()
    handler.wfile.write(content)


def sse_reply(
    events: list[str | bytes | float], then: str = "end", content_type: str = "text/event-stream"
) -> Reply:
    """Stream ``events`` (each ``"data: ..."`` or ``"event: ...\\ndata: ..."``) as server-sent events.

    A ``bytes`` item is sent as it is (no blank line added), a ``float`` one is a pause of that many
    seconds. ``then``: ``"end"`` finishes the stream; ``"cut"`` drops the connection mid-body;
    ``"hold"`` keeps sending comments until the client goes away, ``"stall"`` sends nothing until then
    (both then set ``server.disconnected``).
    """

    def chunk(handler: _Handler, data: bytes) -> None:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        handler.wfile.flush()

    def reply(handler: _Handler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", content_type)
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()
        for event in events:
            if isinstance(event, float):
                time.sleep(event)
            else:
                chunk(handler, event if isinstance(event, bytes) else event.encode() + b"\n\n")
        if then == "end":
            handler.wfile.write(b"0\r\n\r\n")
        elif then == "cut":
            handler.connection.shutdown(socket.SHUT_RDWR)
            handler.close_connection = True
        elif then == "stall":
            # the client's close makes the socket readable (at its end); 10 s at most
            if select.select([handler.connection], [], [], 10)[0]:
                handler.server.owner.disconnected.set()  # type: ignore[attr-defined]
            handler.close_connection = True
        else:
            deadline = time.monotonic() + 10
            try:
                while time.monotonic() < deadline:
                    chunk(handler, b": keep-alive\n\n")
                    time.sleep(0.01)
            except OSError:
                handler.server.owner.disconnected.set()  # type: ignore[attr-defined]
            handler.close_connection = True

    return reply


# --- a server that echoes the credential it was sent back: escaped, encoded, across every cut ------------

ESCAPED_CREDENTIALS = {
    "scale": {"api_key": "sk-\"Esc'aped\\Key/+=%&-SECRET-0123", "account_id": "acct-1"},
    "gradient": {"access_token": "gr-\"Esc'aped\\Tok/+=%&-SECRET-9876", "workspace_id": "ws-1"},
}
"""Credentials with every character a message escapes: quotes and a backslash (JSON, ``repr``), and
``/``, ``+``, ``=``, ``%``, ``&`` (URL encoding)."""
EXCERPT = 500
"""Where an error's message cuts what the server sent."""
ECHOES = ("json", "repr", "url", "sample", "status_line")


def fragments(secret: str) -> set[str]:
    """Every 8 characters of ``secret`` in each form a message could show it: as it is, JSON- and
    repr-escaped, URL-encoded. A message holding none of them holds no part of the secret."""
    forms = {secret, json.dumps(secret)[1:-1], repr(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    return {form[i : i + 8] for form in forms for i in range(len(form) - 7)}


def echo_secret_reply(kind: str) -> Reply:
    """Answer with the credential the request carried (``x-api-key``, or the bearer token) in the server's
    answer, placed where a message cuts it: ``json``, a 400 whose JSON body's text holds it across the
    message's cut of the body; ``repr``, a 200 whose text is not JSON, across that cut; ``url``, a 307 to
    a URL holding it URL-encoded, across the cut; ``sample``, flagged content (Gradient; a 422 on Scale)
    across the sample's cut; ``status_line``, a garbled status line holding it."""

    def reply(handler: _Handler) -> None:
        sent = (handler.headers.get("x-api-key") or handler.headers["authorization"]).rpartition(" ")[2]
        gradient = "authorization" in handler.headers
        headers: dict[str, str] = {}
        if kind == "json":
            pad = EXCERPT - len('{"detail": "') - len(json.dumps(sent)) // 2
            status, body = 400, {"detail": "x" * pad + sent + " was refused"}
        elif kind == "repr":
            status, body = 200, ("x" * (EXCERPT - len(sent) // 2) + sent + " is not JSON").encode()
        elif kind == "url":
            encoded = quote(sent, safe="")
            pad = EXCERPT - len("redirect to https://login.example/?next=") - len(encoded) // 2
            status, body = 307, b""
            headers["location"] = f"https://login.example/{'p' * pad}?next={encoded}"
        elif kind == "sample" and gradient:
            sample = "x" * (ContentFlaggedError.SHOWN_SAMPLE - len(sent) // 2) + sent
            payload = {"flaggedContent": [{"sample": sample}]}
            status, body = 400, {"type": "flaggedContent", "message": "flagged", "payload": payload}
        elif kind == "sample":
            msg = "x" * (EXCERPT - len("body.prompt: ") - len(sent) // 2) + sent
            status, body = 422, {"detail": [{"loc": ["body", "prompt"], "msg": msg, "type": "value_error"}]}
        else:
            handler.wfile.write(b"HTTP/1.1 2x0 " + sent.encode() + b"\r\ncontent-length: 0\r\n\r\n")
            handler.close_connection = True
            return
        json_reply(status, body, headers)(handler)

    return reply


def some_value(schema: dict[str, Any]) -> Any:
    """A value a keyword's schema (``KEYWORDS`` of ``generated/<api>/params.py``) allows, other than
    its server default: what a test sends to change one parameter."""
    if "enum" in schema:
        return schema["enum"][-1]
    kind = schema.get("type")
    if kind == "boolean":
        return not schema.get("default", False)
    if kind in ("integer", "number"):
        return 1 if kind == "integer" else 0.5
    if kind == "array":
        return [some_value(schema.get("items", {"type": "string"}))] * max(1, schema.get("minItems", 1))
    if kind == "object":
        return {
            name: some_value(sub) for name, sub in schema.get("properties", {"k": {"type": "string"}}).items()
        }
    return "x" * max(1, schema.get("minLength", 1))


def clean_environment(**env: str) -> dict[str, str]:
    """This process's environment without the clients' settings (nor pytest's), plus ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in ENV_VARS and not k.startswith("PYTEST_")}
    return clean | env


@contextlib.contextmanager
def gunicorn_serving(
    app_dir: Path, env: dict[str, str], log: Path, *, workers: int, ready: str, options: tuple[str, ...] = ()
) -> Iterator[str]:
    """``app:app`` of ``app_dir`` under gunicorn (uvicorn workers) on a free port, until each of its
    ``workers`` has logged ``ready``; the URL it serves at. Stopped with SIGTERM on the way out."""
    command = [
        sys.executable, "-m", "gunicorn", "app:app", *options, "--workers", str(workers),
        "--worker-class", "uvicorn_worker.UvicornWorker", "--bind", "127.0.0.1:0",
        "--chdir", str(app_dir), "--error-logfile", str(log), "--graceful-timeout", "5",
    ]  # fmt: skip
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = time.monotonic()
        while not (log.exists() and log.read_text().count(ready) == workers):
            assert server.poll() is None, log.read_text() if log.exists() else "gunicorn exited"
            assert time.monotonic() - started < 60, log.read_text() if log.exists() else "no log"
            time.sleep(0.05)
        listening = re.search(r"Listening at: (http://\S+)", log.read_text())
        assert listening, log.read_text()
        yield listening[1]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
