"""Many async streams at once: ``AsyncScale.stream`` against plain aiohttp, over a server that holds answers.

Each run opens ``streams`` Scale streams of ``stream_chunks`` events from ``stream_concurrency``
tasks sharing one client, the server holding each answer ``stream_delay`` seconds before its first
byte (an LLM's latency); the figure is the run's wall time. The baseline reads the same streams with
a plain aiohttp session (no connection cap), splitting lines and parsing each event's JSON.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp
from _apis import ACCOUNT, KEY, MODEL, PROMPT, SCALE_HEADERS, SCALE_PATH, scale_body
from _stats import Row, Sizes, interleaved

from wrapper.scale import AsyncScale

__all__ = ["stream_load_rows"]


async def _wall_s(
    streams: int, concurrency: int, chunks: int, read: Callable[[], AsyncIterator[Any]]
) -> float:
    remaining: Iterator[int] = iter(range(streams))

    async def worker() -> None:
        for _ in remaining:
            received = 0
            async for _chunk in read():
                received += 1
            if received != chunks:
                raise RuntimeError(f"expected {chunks} chunks, got {received}")

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start


def stream_load_rows(url: str, sizes: Sizes, tls: ssl.SSLContext | None = None) -> list[Row]:
    """The one row: wall time of many concurrent streams, against plain aiohttp (trusting ``tls``'s CA
    over HTTPS: the wrapper trusts it through ``SSL_CERT_FILE``)."""
    body = json.dumps(scale_body(stream=True, max_tokens=sizes.stream_chunks)).encode()
    headers = {**SCALE_HEADERS, "content-type": "application/json", "accept": "text/event-stream"}
    loop = asyncio.new_event_loop()

    async def open_clients() -> tuple[AsyncScale, aiohttp.ClientSession]:
        connector = aiohttp.TCPConnector(limit=0, ssl=tls if tls is not None else True)
        return AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url), aiohttp.ClientSession(
            connector=connector
        )

    scale, session = loop.run_until_complete(open_clients())

    async def plain() -> AsyncIterator[Any]:
        async with session.post(url + SCALE_PATH, data=body, headers=headers) as response:
            async for line in response.content:
                if line.startswith(b"data: "):
                    yield json.loads(line[6:])

    def wrapper() -> AsyncIterator[Any]:
        return scale.stream(MODEL, PROMPT, max_tokens=sizes.stream_chunks)

    def timed(read: Callable[[], AsyncIterator[Any]]) -> Callable[[], float]:
        run: Callable[[], Awaitable[float]] = lambda: _wall_s(  # noqa: E731
            sizes.streams, sizes.stream_concurrency, sizes.stream_chunks, read
        )
        return lambda: loop.run_until_complete(run()) * 1e3

    try:
        variants = {"wrapper": timed(wrapper), "aiohttp": timed(plain)}
        for run in variants.values():  # open the connections, fill caches
            run()
        figures = interleaved(sizes.runs, variants)
    finally:
        loop.run_until_complete(scale.close())
        loop.run_until_complete(session.close())
        loop.close()
    name = (
        f"{'' if tls is None else 'TLS '}async AsyncScale.stream {sizes.streams} x {sizes.stream_chunks} "
        f"chunks @{sizes.stream_concurrency}, answers held {sizes.stream_delay:g} s"
    )
    target = 1.3 if tls is None else 1.2
    return [Row(name, "ms wall", figures["wrapper"], "aiohttp", figures["aiohttp"], target=target)]
