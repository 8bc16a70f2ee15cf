"""The clients over TLS, as every real call is: each row against raw aiohttp and raw httpx (and httpx2),
in the same run.

The bench makes a throwaway CA and certificate (trustme) and serves HTTPS with it (``server.py --tls``;
``h2_server.py`` for HTTP/2). The wrapper's clients trust it through ``SSL_CERT_FILE``, as an
application's would; the raw clients through one TLS context of the same CA, built once, so that no row
but the construction row counts loading a CA.

- async keep-alive: ``AsyncScale.complete`` at concurrency ``concurrency``, connections kept alive;
- 500 at once, cold: a new client sends ``cold_requests`` requests at once, each answer held
  ``cold_delay`` s, so every one opens a connection (a TLS handshake each, on one client CPU);
- sync CPU per request: sequential ``Scale.complete`` against ``httpx.Client.post(...).json()``, runs
  paired as in ``row_sync``;
- construction: building and closing ``clients`` clients, against a 2 ms target (an httpx client loads a
  CA bundle into a context of its own; the package's clients share one cached context);
- streams: ``row_streams``'s row over TLS;
- 500 at once over HTTP/2 (one connection) against HTTP/1.1 (a connection each), for information.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx2
import trustme
from _apis import ACCOUNT, KEY, MAX_TOKENS, MODEL, PROMPT, SCALE_HEADERS, SCALE_PATH, scale_body
from _runs import cpu_per_request, wall_ms
from _stats import Figure, Row, Sizes, interleaved
from row_streams import stream_load_rows
from server import serve, serve_h2

import wrapper
from wrapper.scale import AsyncScale, Scale

__all__ = ["tls_rows"]

HTTP_ENV = "COMPLETION_CLIENTS_HTTP"
BUILD_TARGET_MS = 2.0


@contextlib.contextmanager
def _certificate() -> Iterator[tuple[Path, ssl.SSLContext]]:
    """A CA and a certificate for 127.0.0.1 in a temporary folder (``cert.pem``, ``key.pem``, ``ca.pem``),
    the wrapper's clients trusting it (``SSL_CERT_FILE``); yields the folder and a context trusting it."""
    ca = trustme.CA()
    with tempfile.TemporaryDirectory(prefix="bench-tls") as name:
        folder = Path(name)
        issued = ca.issue_cert("127.0.0.1")
        issued.private_key_pem.write_to_path(str(folder / "key.pem"))
        issued.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
        ca.cert_pem.write_to_path(str(folder / "ca.pem"))
        before = os.environ.get("SSL_CERT_FILE")
        os.environ["SSL_CERT_FILE"] = str(folder / "ca.pem")
        try:
            yield folder, ssl.create_default_context(cafile=str(folder / "ca.pem"))
        finally:
            if before is None:
                del os.environ["SSL_CERT_FILE"]
            else:
                os.environ["SSL_CERT_FILE"] = before


@contextlib.contextmanager
def _on(library: str) -> Iterator[None]:
    """The clients built inside on ``library`` (``COMPLETION_CLIENTS_HTTP``)."""
    before = os.environ.get(HTTP_ENV)
    os.environ[HTTP_ENV] = library
    try:
        yield
    finally:
        if before is None:
            del os.environ[HTTP_ENV]
        else:
            os.environ[HTTP_ENV] = before


def _keep_alive(url: str, context: ssl.SSLContext, sizes: Sizes) -> list[Row]:
    body = scale_body()
    loop = asyncio.new_event_loop()
    limit = sizes.concurrency

    async def clients() -> tuple[AsyncScale, aiohttp.ClientSession, httpx.AsyncClient, httpx2.AsyncClient]:
        connector = aiohttp.TCPConnector(limit=limit, ssl=context)
        return (
            AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url),
            aiohttp.ClientSession(url, headers=SCALE_HEADERS, connector=connector),
            httpx.AsyncClient(
                base_url=url,
                headers=SCALE_HEADERS,
                verify=context,
                limits=httpx.Limits(max_connections=limit),
            ),
            httpx2.AsyncClient(
                base_url=url,
                headers=SCALE_HEADERS,
                verify=context,
                limits=httpx2.Limits(max_connections=limit),
            ),
        )

    scale, session, plain, plain2 = loop.run_until_complete(clients())

    async def with_aiohttp() -> None:
        async with session.post(SCALE_PATH, json=body) as response:
            await response.json()

    async def with_httpx() -> None:
        (await plain.post(SCALE_PATH, json=body)).json()

    async def with_httpx2() -> None:
        (await plain2.post(SCALE_PATH, json=body)).json()

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "wrapper": lambda: scale.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS),
        "aiohttp": with_aiohttp,
        "httpx": with_httpx,
        "httpx2": with_httpx2,
    }
    # httpx's async pools take 5 to 20 times as long: they send a quarter as many requests a run.
    counts = {"wrapper": sizes.requests, "aiohttp": sizes.requests, "httpx": sizes.requests // 4}
    counts["httpx2"] = counts["httpx"]

    def per_request(name: str) -> Callable[[], float]:
        call, count = calls[name], counts[name]
        return lambda: loop.run_until_complete(wall_ms(count, limit, call)) * 1e3 / count

    try:
        for call in calls.values():  # open the connections, fill caches
            loop.run_until_complete(wall_ms(limit * 4, limit, call))
        figures = interleaved(sizes.runs, {name: per_request(name) for name in calls})
    finally:
        loop.run_until_complete(scale.close())
        loop.run_until_complete(session.close())
        loop.run_until_complete(plain.aclose())
        loop.run_until_complete(plain2.aclose())
        loop.close()
    name, unit = f"TLS async AsyncScale.complete x{sizes.requests} @{limit}, keep-alive", "µs wall/request"
    note = f"httpx's and httpx2's figures: {counts['httpx']} requests a run"
    return [
        Row(name, unit, figures["wrapper"], "aiohttp", figures["aiohttp"], target=1.1),
        Row(name, unit, figures["wrapper"], "httpx.AsyncClient", figures["httpx"], target=None, note=note),
        Row(name, unit, figures["wrapper"], "httpx2.AsyncClient", figures["httpx2"], target=None),
    ]


def _cold(url: str, context: ssl.SSLContext, sizes: Sizes) -> list[Row]:
    """``cold_requests`` at once from a new client each run, every answer held ``cold_delay`` s."""
    requests, body = sizes.cold_requests, scale_body()

    async def at_once(call: Callable[[], Awaitable[Any]]) -> float:
        start = time.perf_counter()
        await asyncio.gather(*(call() for _ in range(requests)))
        return time.perf_counter() - start

    async def wrapper_run() -> float:
        async with AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=60) as scale:
            return await at_once(lambda: scale.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS))

    async def aiohttp_run() -> float:
        connector = aiohttp.TCPConnector(limit=0, ssl=context)
        async with aiohttp.ClientSession(url, headers=SCALE_HEADERS, connector=connector) as session:

            async def post() -> None:
                async with session.post(SCALE_PATH, json=body) as response:
                    await response.json()

            return await at_once(post)

    def raw(library: Any) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            limits = library.Limits(max_connections=None, max_keepalive_connections=None)
            timeout = library.Timeout(60)
            options = {"headers": SCALE_HEADERS, "verify": context, "limits": limits, "timeout": timeout}
            async with library.AsyncClient(base_url=url, **options) as client:
                return await at_once(lambda: client.post(SCALE_PATH, json=body))

        return run

    runs = {"wrapper": wrapper_run, "aiohttp": aiohttp_run, "httpx": raw(httpx), "httpx2": raw(httpx2)}
    figures = interleaved(
        sizes.cold_runs, {name: lambda run=run: asyncio.run(run()) for name, run in runs.items()}
    )
    name = f"TLS async {requests} at once, cold connections, answers held {sizes.cold_delay:g} s"
    ideal = f"the {sizes.cold_delay:g} s ideal"
    note = f"raw aiohttp's own figure: {figures['aiohttp'].median:.2f} s against {ideal}"
    return [
        Row(name, "s wall", figures["wrapper"], "aiohttp", figures["aiohttp"], target=1.15, note=note),
        Row(name, "s wall", figures["wrapper"], "httpx.AsyncClient", figures["httpx"], target=None),
        Row(name, "s wall", figures["wrapper"], "httpx2.AsyncClient", figures["httpx2"], target=None),
    ]


def _sync(url: str, context: ssl.SSLContext, sizes: Sizes) -> list[Row]:
    body = scale_body()
    with _on("httpx2"):
        scale2 = Scale(api_key=KEY, account_id=ACCOUNT, base_url=url)
    with (
        Scale(api_key=KEY, account_id=ACCOUNT, base_url=url) as scale,
        scale2,
        httpx.Client(base_url=url, headers=SCALE_HEADERS, verify=context) as plain,
        httpx2.Client(base_url=url, headers=SCALE_HEADERS, verify=context) as plain2,
    ):
        calls: dict[str, Callable[[], Any]] = {
            "wrapper": lambda: scale.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS),
            "wrapper on httpx2": lambda: scale2.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS),
            "httpx": lambda: plain.post(SCALE_PATH, json=body).json(),
            "httpx2": lambda: plain2.post(SCALE_PATH, json=body).json(),
        }
        for call in calls.values():  # connect, fill caches
            cpu_per_request(sizes.cpu_requests, call)()
        figures = interleaved(
            sizes.cpu_runs, {name: cpu_per_request(sizes.cpu_requests, call) for name, call in calls.items()}
        )
    name, unit = f"Scale.complete x{sizes.cpu_requests}", "µs CPU/request"
    return [
        Row(
            f"TLS sync on httpx: {name}",
            unit,
            figures["wrapper"],
            "httpx.Client",
            figures["httpx"],
            target=1.0,
            compare="paired",
        ),
        Row(
            f"TLS sync on httpx2: {name}",
            unit,
            figures["wrapper on httpx2"],
            "httpx2.Client",
            figures["httpx2"],
            target=1.0,
            compare="paired",
        ),
    ]


def _construction(sizes: Sizes) -> list[Row]:
    """Building and closing ``clients`` clients of each kind (sync and async) on each library."""
    count = sizes.clients

    loop = asyncio.new_event_loop()  # the async clients are closed in it (no loop built per client)

    def build(library: str) -> Callable[[], float]:
        def run() -> float:
            with _on(library):
                start = time.perf_counter()
                for _ in range(count):
                    Scale(api_key=KEY).close()
                    loop.run_until_complete(AsyncScale(api_key=KEY).close())
                return (time.perf_counter() - start) * 1e3 / (2 * count)

        return run

    def raw(library: Any) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            for _ in range(count):
                library.Client().close()
                loop.run_until_complete(library.AsyncClient().aclose())
            return (time.perf_counter() - start) * 1e3 / (2 * count)

        return run

    variants = {
        "httpx": build("httpx"),
        "httpx2": build("httpx2"),
        "raw httpx": raw(httpx),
        "raw httpx2": raw(httpx2),
    }
    try:
        (
            build("httpx")(),
            build("httpx2")(),
        )  # the cached TLS contexts, as any process's first client makes them
        figures = interleaved(sizes.runs, variants)
    finally:
        loop.close()
    target = Figure((BUILD_TARGET_MS,))
    rows = []
    for library in ("httpx", "httpx2"):
        raw_ms = figures[f"raw {library}"].median
        note = (
            f"{library}.Client() and AsyncClient(), built and closed: {raw_ms:.1f} ms each (a CA load each)"
        )
        name = f"TLS build and close on {library}: {count} Scale and {count} AsyncScale"
        rows.append(Row(name, "ms a client", figures[library], "target", target, target=1.0, note=note))
    return rows


def _h2(url: str, sizes: Sizes) -> list[Row]:
    """``cold_requests`` at once from a new client: HTTP/2 (``DefaultAsyncHttpxClient(http2=True)``, one
    connection, the server's 100 streams at a time) against HTTP/1.1 (the default aiohttp lane)."""
    requests = sizes.cold_requests

    def run(http2: bool) -> Callable[[], float]:
        async def at_once() -> float:
            http_client = wrapper.DefaultAsyncHttpxClient(http2=True) if http2 else None
            async with AsyncScale(api_key=KEY, base_url=url, timeout=60, http_client=http_client) as scale:
                start = time.perf_counter()
                await asyncio.gather(*(scale.complete(MODEL, PROMPT) for _ in range(requests)))
                return time.perf_counter() - start

        return lambda: asyncio.run(at_once())

    figures = interleaved(sizes.cold_runs, {"h2": run(True), "http/1.1": run(False)})
    name = f"TLS async {requests} at once over HTTP/2, answers held {sizes.cold_delay:g} s"
    note = "hypercorn, 100 concurrent streams a connection: httpx sends every request on one connection"
    return [
        Row(name, "s wall", figures["h2"], "HTTP/1.1 (aiohttp)", figures["http/1.1"], target=None, note=note)
    ]


def tls_rows(sizes: Sizes, cpus: set[int] | None) -> list[Row]:
    """Every TLS row, each against its servers (on ``cpus``)."""
    rows = _construction(sizes)  # with the default CAs, as an application builds its clients
    with _certificate() as (folder, context):
        with serve(sizes.chunks, cpus, tls=folder) as server:
            rows += _keep_alive(server.url, context, sizes) + _sync(server.url, context, sizes)
        with serve(2, cpus, delay=sizes.cold_delay, tls=folder) as slow:
            rows += _cold(slow.url, context, sizes)
        with serve(sizes.stream_chunks, cpus, delay=sizes.stream_delay, tls=folder) as streaming:
            rows += stream_load_rows(streaming.url, sizes, context)
        with serve_h2(folder, cpus, delay=sizes.cold_delay) as h2:
            rows += _h2(h2.url, sizes)
    return rows
