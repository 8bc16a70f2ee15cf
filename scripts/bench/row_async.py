"""Async throughput: ``AsyncScale.complete`` at fixed concurrency vs plain aiohttp and ``httpx.AsyncClient``.

Each run sends ``requests`` requests from ``concurrency`` workers sharing one client; the figure is
the run's wall time. The server's CPU share during the runs is noted, to show it was not the limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
from _apis import ACCOUNT, KEY, MAX_TOKENS, MODEL, PROMPT, SCALE_HEADERS, SCALE_PATH, scale_body
from _runs import wall_ms
from _stats import Row, Sizes, interleaved
from server import Server

from wrapper.scale import AsyncScale

__all__ = ["async_rows"]


class _Load:
    """Adds up the server's CPU time and the wall time of the runs: the server's share of its CPU."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._cpu = self._wall = 0.0

    @property
    def share(self) -> float | None:
        return self._cpu / self._wall if self._wall and self._server.cpu_seconds() is not None else None

    def timed(
        self, loop: asyncio.AbstractEventLoop, run: Callable[[], Awaitable[float]]
    ) -> Callable[[], float]:
        def sample() -> float:
            cpu_before = self._server.cpu_seconds() or 0.0
            wall_ms = loop.run_until_complete(run())
            self._cpu += (self._server.cpu_seconds() or 0.0) - cpu_before
            self._wall += wall_ms / 1e3
            return wall_ms

        return sample


async def _clients(url: str, concurrency: int) -> tuple[AsyncScale, aiohttp.ClientSession, httpx.AsyncClient]:
    return (
        AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url),
        aiohttp.ClientSession(url, headers=SCALE_HEADERS, connector=aiohttp.TCPConnector(limit=concurrency)),
        httpx.AsyncClient(
            base_url=url, headers=SCALE_HEADERS, limits=httpx.Limits(max_connections=concurrency)
        ),
    )


def async_rows(server: Server, sizes: Sizes) -> list[Row]:
    """The row against aiohttp (the target) and the one against ``httpx.AsyncClient`` (for information)."""
    body = scale_body()
    loop = asyncio.new_event_loop()
    scale, session, plain = loop.run_until_complete(_clients(server.url, sizes.concurrency))

    async def with_aiohttp() -> None:
        async with session.post(SCALE_PATH, json=body) as response:
            await response.json()

    async def with_httpx() -> None:
        (await plain.post(SCALE_PATH, json=body)).json()

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "wrapper": lambda: scale.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS),
        "aiohttp": with_aiohttp,
        "httpx": with_httpx,
    }
    load = _Load(server)
    try:
        for call in calls.values():  # open the connections, fill caches
            loop.run_until_complete(wall_ms(sizes.concurrency * 4, sizes.concurrency, call))
        figures = interleaved(
            sizes.runs,
            {
                name: load.timed(loop, lambda call=call: wall_ms(sizes.requests, sizes.concurrency, call))
                for name, call in calls.items()
            },
        )
    finally:
        loop.run_until_complete(scale.close())
        loop.run_until_complete(session.close())
        loop.run_until_complete(plain.aclose())
        loop.close()
    note = "" if load.share is None else f"the server was busy {load.share:.0%} of the time on its CPU"
    name = f"async AsyncScale.complete x{sizes.requests} @{sizes.concurrency}"
    return [
        Row(name, "ms wall", figures["wrapper"], "aiohttp", figures["aiohttp"], target=1.2, note=note),
        Row(name, "ms wall", figures["wrapper"], "httpx.AsyncClient", figures["httpx"], target=None),
    ]
