"""Edges of the clients: malformed Scale bodies, header-unsafe settings, debug logging on the fast lane,
and pools that never make a request wait for a connection."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import select
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from helpers import (
    CLASSES,
    CREDENTIALS,
    Held,
    LocalServer,
    call,
    collect,
    drain,
    json_reply,
    scale_body,
    sse_reply,
    wait_until,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrapper.errors import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    InternalServerError,
)
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

pytestmark = [
    pytest.mark.usefixtures("library"),  # every test on httpx and on httpx2
    pytest.mark.long("parallel"),  # 38-50 s of one process in make test
]

# --- a malformed Scale body fails at complete(), never later from .raw ---------------------------------

BAD_COMPLETIONS = [
    {"completions": [["p", ["x"]], 5]},
    {"completions": [["p", ["x"]], None]},
    {"completions": "abc"},
    {"completions": [["p", ["x"]]], "choices": None},
    {"completions": [["p", ["x"]]], "choices": 0},
]


@pytest.mark.parametrize("body", BAD_COMPLETIONS)
async def test_a_malformed_body_fails_at_complete(
    make_client: Any, server: LocalServer, mode: str, body: dict[str, Any]
) -> None:
    """Over a socket: the sync client, and the async one on its fast lane."""
    server.script(json_reply(200, body))
    client = make_client("scale", mode, base_url=server.url, max_retries=0)
    with pytest.raises(APIResponseValidationError) as caught:
        await call(client.complete("m", "p"))
    assert json.loads(caught.value.text) == body


@pytest.mark.parametrize("body", BAD_COMPLETIONS)
async def test_a_malformed_stream_event_fails_in_the_stream(
    make_client: Any, mode: str, body: dict[str, Any]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        events = f"data: {json.dumps(scale_body('ok'))}\n\ndata: {json.dumps(body)}\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=events)

    received: list[str] = []
    with pytest.raises(APIResponseValidationError):
        await drain(make_client("scale", mode, handler).stream("m", "p"), received)
    assert received == ["ok"]


DEEP = b'{"completions": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
"""A body nested deeper than Python's stack allows to read (``json.loads`` raises ``RecursionError``)."""


@pytest.fixture
def collected_first() -> None:
    """Before a test that reads ``DEEP``, the garbage earlier tests of this worker left is collected.

    ``json.loads`` of ``DEEP`` allocates at every level down to the recursion limit, which can start a
    collection there: a finalizer of an earlier test's object (a generator's ``finally``, a warning
    about an unclosed resource) then runs with no stack left, and pytest's hook cannot even name it
    (``RecursionError ... Failed to process unraisable exception``, once in a full run).
    """
    gc.collect()


@pytest.mark.usefixtures("collected_first")
@pytest.mark.parametrize("api", ["scale", "gradient"])
@pytest.mark.parametrize("status", [200, 500])
async def test_a_body_nested_too_deeply_is_a_typed_error(
    make_client: Any, server: LocalServer, lane: str, status: int, api: str
) -> None:
    """A success is a validation error; an error status keeps its class, with the body as text."""
    server.script(json_reply(status, DEEP))
    client = make_client(api, lane, base_url=server.url, max_retries=0)
    expected = APIResponseValidationError if status == 200 else InternalServerError
    with pytest.raises(expected) as caught:
        await call(client.complete("m", "p"))
    assert type(caught.value) is expected
    if status == 200:
        assert "nested too deeply" in str(caught.value)
        assert caught.value.text.encode() == DEEP


@pytest.mark.usefixtures("collected_first")
@pytest.mark.parametrize(
    ("event", "expected"), [("", APIResponseValidationError), ("error", InternalServerError)]
)
async def test_a_stream_event_nested_too_deeply_is_a_typed_error(
    make_client: Any, server: LocalServer, lane: str, event: str, expected: type[Exception]
) -> None:
    """A chunk is a validation error; an ``error`` event keeps its class, with its data as text."""
    deep = (f"event: {event}\n" if event else "") + "data: " + DEEP.decode()
    server.script(sse_reply([f"data: {json.dumps(scale_body('ok'))}", deep]))
    received: list[str] = []
    with pytest.raises(expected) as caught:
        await drain(make_client("scale", lane, base_url=server.url).stream("m", "p"), received)
    assert type(caught.value) is expected
    assert received == ["ok"]


@pytest.mark.usefixtures("collected_first")
async def test_a_batch_raises_a_body_nested_too_deeply_as_a_typed_error(
    make_client: Any, server: LocalServer, lane: str
) -> None:
    server.script(json_reply(200, DEEP))
    client = make_client("scale", lane, base_url=server.url, max_retries=0)
    results = client.complete_many("m", ["a", "b"], return_exceptions=True)
    errors = [result.error for result in await collect(results)]
    assert [type(error) for error in errors] == [APIResponseValidationError] * 2
    with pytest.raises(APIResponseValidationError):
        await collect(client.complete_many("m", ["a", "b"]))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
SCALE_FIELDS = st.fixed_dictionaries(
    {"completions": JSON},
    optional={
        "choices": JSON,
        "finish_reason": JSON,
        "prompt_tokens": JSON,
        "response_tokens": JSON,
    },
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=SCALE_FIELDS
    | st.fixed_dictionaries({"completions": st.lists(st.lists(JSON, max_size=3), max_size=3)})
)
def test_whenever_complete_returns_raw_builds(body: dict[str, Any]) -> None:
    """Any JSON object with ``completions``: complete() raises the validation error, or ``raw`` builds."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    with Scale(
        api_key="k", base_url="https://api.test", http_client=httpx.Client(transport=transport)
    ) as scale:
        try:
            result = scale.complete("m", "p")
        except APIResponseValidationError:
            return
    assert result.raw.completions == body["completions"]


# --- settings that would break an HTTP header are refused when the client is built ----------------------


SETTINGS = [
    ("scale", "api_key", "SGP_API_KEY"),
    ("scale", "account_id", "SGP_ACCOUNT_ID"),
    ("gradient", "access_token", "GRADIENT_ACCESS_TOKEN"),
    ("gradient", "workspace_id", "GRADIENT_WORKSPACE_ID"),
]
UNSAFE = ["secret\r\nX-Injected: 1", "secret\n", "sec\x00ret", "sec\x7fret", "sec\tret", "sécret"]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("provider", "argument", "env"), SETTINGS)
@pytest.mark.parametrize("value", UNSAFE)
@pytest.mark.parametrize("is_async", [False, True])
def test_unsafe_settings_are_refused_at_build(
    provider: str, argument: str, env: str, value: str, is_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = CLASSES[provider][is_async]
    with pytest.raises(ValueError, match=rf"^{argument} \(or {env}\) must be printable ASCII") as caught:
        cls(**{**CREDENTIALS[provider], argument: value})
    assert value not in str(caught.value)  # it may be a secret
    if "\x00" in value:
        return  # no environment variable can hold a NUL
    monkeypatch.setenv(env, value)  # from the environment too
    with pytest.raises(ValueError, match=rf"^{argument} \(or {env}\)"):
        cls(**{name: v for name, v in CREDENTIALS[provider].items() if name != argument})


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("cls", [Scale, AsyncScale])
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"X-Team": "a\r\nb"}, r"default_headers\['X-Team'\] must be printable ASCII"),
        ({"X Team": "a"}, "not a valid HTTP header name"),
        ({"X-Team:": "a"}, "not a valid HTTP header name"),
        ({"X-Team": 5}, r"default_headers\['X-Team'\] must be a string"),
        ([("X-Team", "a")], "default_headers must be a mapping"),
    ],
)
def test_unsafe_default_headers_are_refused(cls: Any, headers: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cls(api_key="k", default_headers=headers)


# --- debug logging does not change the path a request takes -------------------------------------------


@pytest.fixture
def httpx_send_forbidden(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail any request sent through httpx's transports; note each one aiohttp's transport sends."""
    from wrapper._core.transports.aiohttp_transport import AiohttpTransport
    from wrapper._core.transports.httpx_transport import AsyncHttpxTransport

    sent: list[str] = []
    send = AiohttpTransport.send

    async def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("sent through httpx, not aiohttp")

    async def noted(self: AiohttpTransport, request: Any) -> Any:
        sent.append(request.url)
        return await send(self, request)

    monkeypatch.setattr(AsyncHttpxTransport, "send", forbidden)
    monkeypatch.setattr(AiohttpTransport, "send", noted)
    return sent


async def test_debug_logging_happens_on_the_fast_lane(
    make_client: Any, server: LocalServer, caplog: pytest.LogCaptureFixture, httpx_send_forbidden: list[str]
) -> None:
    server.script(json_reply(503, {"detail": "busy"}), json_reply(200, scale_body("fast")))
    client = make_client("scale", "async", base_url=server.url, max_retries=0)
    with caplog.at_level(logging.DEBUG, logger="wrapper"):
        with pytest.raises(InternalServerError):
            await client.complete("m", "p")
        assert (await client.complete("m", "p")).text == "fast"
    assert len(server.requests) == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "wrapper" and r.levelno == logging.DEBUG]
    assert [m.split(" in ")[0] for m in messages] == [
        f"POST {server.url}/v4/models/m/completions -> 503",
        f"POST {server.url}/v4/models/m/completions -> 200",
    ]
    assert all("'x-api-key': '<redacted>'" in m for m in messages)
    assert httpx_send_forbidden == [f"{server.url}/v4/models/m/completions"] * 2


async def test_a_failure_on_the_fast_lane_is_logged(
    make_client: Any, caplog: pytest.LogCaptureFixture, httpx_send_forbidden: list[str]
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client("scale", "async", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with caplog.at_level(logging.DEBUG, logger="wrapper"), pytest.raises(APIConnectionError):
        await client.complete("m", "p")
    (record,) = [r for r in caplog.records if r.name == "wrapper"]
    assert f"POST http://127.0.0.1:{port}/v4/models/m/completions failed after" in record.getMessage()
    assert len(httpx_send_forbidden) == 1


# --- pools: concurrency N is N requests in flight, and limits caps it ------------------------------------


IN_FLIGHT = 150  # above httpx's default pool of 100


def all_at_once(parties: int) -> Any:
    """A ``LocalServer`` reply that answers only once ``parties`` requests are open at the same time
    (else, after 20 s, 503): it succeeds only if no client made a request wait for a connection."""
    barrier = threading.Barrier(parties, timeout=20)

    def reply(handler: Any) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            json_reply(503, {"detail": "not all in flight"})(handler)
        else:
            json_reply(200, scale_body())(handler)

    return reply


@pytest.mark.timeout(60)
async def test_default_pools_put_every_request_in_flight(
    make_client: Any, server: LocalServer, mode: str
) -> None:
    server.script(all_at_once(IN_FLIGHT))
    client = make_client("scale", mode, base_url=server.url, timeout=30, max_retries=0)
    if mode == "async":
        results = await asyncio.gather(*(client.complete("m", "p") for _ in range(IN_FLIGHT)))
    else:
        with ThreadPoolExecutor(IN_FLIGHT) as threads:  # many threads sharing one client
            futures = [threads.submit(client.complete, "m", "p") for _ in range(IN_FLIGHT)]
            results = await asyncio.to_thread(lambda: [future.result() for future in futures])
    assert [r.text for r in results] == ["Paris"] * IN_FLIGHT


@pytest.fixture(scope="module")
def slow_sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.mark.serial  # an in-flight peak within a 0.5 s hold
@pytest.mark.timeout(60)
@pytest.mark.parametrize("is_async", [False, True])
async def test_limits_cap_the_connections(slow_sandbox: Sandbox, is_async: bool) -> None:
    requests, limits = 8, httpx.Limits(max_connections=3)
    slow_sandbox.reset_stats()
    slow_sandbox.inject(delay=0.5, count=requests, api="scale")
    client = (AsyncScale if is_async else Scale)(
        api_key="k", base_url=slow_sandbox.scale_base_url, timeout=30, max_retries=0, limits=limits
    )
    try:
        if is_async:
            await asyncio.gather(
                *(client.complete("llama-3-8b-instruct", "Alice", max_tokens=1) for _ in range(requests))
            )
        else:
            with ThreadPoolExecutor(requests) as threads:
                futures = [
                    threads.submit(client.complete, "llama-3-8b-instruct", "Alice", max_tokens=1)
                    for _ in range(requests)
                ]
                await asyncio.to_thread(lambda: [future.result() for future in futures])
    finally:
        await call(client.close())
    stats = slow_sandbox.stats()
    assert (stats.requests, stats.max_in_flight) == (requests, 3)


def test_sync_calls_one_after_another_reuse_one_connection(server: LocalServer) -> None:
    ports: list[int] = []

    def reply(handler: Any) -> None:
        ports.append(handler.client_address[1])
        json_reply(200, scale_body())(handler)

    server.script(reply)
    with Scale(api_key="k", base_url=server.url, max_retries=0) as client:
        for _ in range(5):
            client.complete("m", "p")
    assert len(ports) == 5
    assert len(set(ports)) == 1


def test_a_sync_call_over_max_connections_waits_up_to_the_pool_timeout(server: LocalServer) -> None:
    event = "data: " + json.dumps(scale_body("streaming"))
    server.script(sse_reply([event], then="hold"), json_reply(200, scale_body("after")))
    limits, timeout = httpx.Limits(max_connections=1), httpx.Timeout(10, pool=0.2)
    with Scale(api_key="k", base_url=server.url, max_retries=0, limits=limits, timeout=timeout) as client:
        stream = client.stream("m", "p")
        assert next(stream).text == "streaming"  # the only connection is the stream's
        with pytest.raises(APITimeoutError):
            client.complete("m", "p")
        stream.close()  # gives the connection back
        assert client.complete("m", "p").text == "after"
    assert len(server.requests) == 2


def test_closing_a_sync_client_lets_a_request_in_flight_finish_with_no_socket_left(
    server: LocalServer,
) -> None:
    held = Held(json_reply(200, scale_body("finished")))
    server.script(held)
    client = Scale(api_key="k", base_url=server.url, max_retries=0)
    with ThreadPoolExecutor(1) as thread:  # a thread still in a request (say, a failed batch's worker)
        future = thread.submit(client.complete, "m", "p")
        assert wait_until(lambda: held.held == 1)
        client.close()
        held.release()
        assert future.result(timeout=10).text == "finished"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del future
        gc.collect()
    assert [w.message for w in caught if issubclass(w.category, ResourceWarning)] == []
    with pytest.raises(RuntimeError, match="closed"):
        client.complete("m", "p")


# --- the sync pool keeps no half-closed socket ---------------------------------------------------------

TCP_TABLE = Path("/proc/net/tcp")
OPEN_STATES = {"01": "ESTABLISHED", "08": "CLOSE_WAIT"}


def open_sockets_to(server: LocalServer) -> list[str]:
    """The states of this machine's sockets (``/proc/net/tcp``) connected to ``server`` and not closed on
    their side: ``ESTABLISHED``, or ``CLOSE_WAIT`` when the server closed its end and the client kept its."""
    port = int(server.url.rsplit(":", 1)[1])
    states = []
    for line in TCP_TABLE.read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] in OPEN_STATES:
            states.append(OPEN_STATES[fields[3]])
    return states


class Burst:
    """A reply that answers after a moment (so that threads calling at once each open a connection) and
    records the client's port; with ``close_idle``, it then closes the connection once idle for 0.2 s,
    as servers do, and records that too."""

    def __init__(self, *, close_idle: bool) -> None:
        self.close_idle = close_idle
        self.ports: set[int] = set()
        self.closed: set[int] = set()

    def __call__(self, handler: Any) -> None:
        time.sleep(0.2)
        json_reply(200, scale_body())(handler)
        self.ports.add(handler.client_address[1])
        if self.close_idle and not select.select([handler.connection], [], [], 0.2)[0]:
            handler.connection.shutdown(socket.SHUT_RDWR)
            handler.close_connection = True
            self.closed.add(handler.client_address[1])


@contextlib.contextmanager
def served(tls: bool, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """A ``LocalServer``, over TLS with a certificate the clients built in the block trust if ``tls``."""
    context = None
    with contextlib.ExitStack() as stack:
        if tls:
            ca = trustme.CA()
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1").configure_cert(context)
            monkeypatch.setenv("SSL_CERT_FILE", stack.enter_context(ca.cert_pem.tempfile()))
        local = LocalServer(tls=context)
        local.start()
        stack.callback(local.stop)
        yield local


@pytest.mark.skipif(not TCP_TABLE.exists(), reason="reads Linux's table of TCP sockets")
@pytest.mark.parametrize(
    ("close_idle", "tls"),
    [(True, False), (True, True), (False, False)],
    ids=["server-closes-idle", "server-closes-idle-tls", "keepalive-expires"],
)
async def test_the_sync_pool_closes_idle_connections_without_another_call(
    monkeypatch: pytest.MonkeyPatch, close_idle: bool, tls: bool
) -> None:
    """After a burst of threaded calls, and no call after it (a web worker after a peak): the connections
    the server closed are closed too, none left half-closed in CLOSE_WAIT (urllib3#2100), and those it
    keeps open are closed once idle for the keep-alive expiry (httpx's pool closes either only on its
    next request)."""
    burst = Burst(close_idle=close_idle)
    limits = httpx.Limits(max_connections=None, keepalive_expiry=60.0 if close_idle else 0.5)
    with served(tls, monkeypatch) as server:
        server.script(burst)
        with Scale(api_key="k", base_url=server.url, max_retries=0, limits=limits) as client:
            with ThreadPoolExecutor(12) as threads:
                calls = await asyncio.to_thread(
                    lambda: list(threads.map(lambda _: client.complete("m", "p"), range(12)))
                )
            assert [result.text for result in calls] == ["Paris"] * 12
            assert len(burst.ports) > 1  # the burst opened several connections
            if close_idle:
                assert await asyncio.to_thread(wait_until, lambda: burst.closed == burst.ports)
            assert await asyncio.to_thread(wait_until, lambda: open_sockets_to(server) == [], 5.0), (
                open_sockets_to(server)
            )
            assert client.complete("m", "p").text == "Paris"  # and the pool is still of use


@pytest.mark.parametrize(("cls", "http"), [(Scale, httpx.Client), (AsyncScale, httpx.AsyncClient)])
async def test_limits_with_your_own_http_client_is_refused(cls: Any, http: Any) -> None:
    mine = http()
    with pytest.raises(ValueError, match="limits applies to the client's own pool"):
        cls(api_key="k", http_client=mine, limits=httpx.Limits(max_connections=5))
    await call(mine.aclose() if isinstance(mine, httpx.AsyncClient) else mine.close())
