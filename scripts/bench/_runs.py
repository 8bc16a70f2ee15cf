"""How the rows time a run: requests from concurrent workers (wall time), and sequential calls (the
client process's CPU time per call)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

__all__ = ["cpu_per_request", "wall_ms"]


async def wall_ms(requests: int, concurrency: int, call: Callable[[], Awaitable[Any]]) -> float:
    """Milliseconds for ``requests`` awaits of ``call()`` shared by ``concurrency`` workers."""
    remaining: Iterator[int] = iter(range(requests))

    async def worker() -> None:
        for _ in remaining:
            await call()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.perf_counter() - start) * 1e3


def cpu_per_request(requests: int, call: Callable[[], Any]) -> Callable[[], float]:
    """A run: ``requests`` sequential calls; its sample: client CPU microseconds per call."""

    def run() -> float:
        start = time.process_time()
        for _ in range(requests):
            call()
        return (time.process_time() - start) / requests * 1e6

    return run
