"""Requests in flight: ``complete_many`` at concurrency above the usual pool sizes, against a slow server.

The bench server holds every answer ``flight_delay`` seconds (an LLM's latency) and reports the most
requests it held at once. Async: the batch's wall time against the ideal (one delay per round of
``concurrency`` prompts), and its peak in flight. Sync: the peak in flight of each of many runs; a
run that hangs (the client's timeout) or errs fails the bench.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time

import httpx
from _apis import ACCOUNT, KEY, MODEL
from _stats import Figure, Row, Sizes

from wrapper.scale import AsyncScale, Scale

__all__ = ["flight_rows"]

TIMEOUT = 30.0  # a run that hangs fails here instead of at the default 600 s


def _peak(url: str) -> int:
    """The most requests the server held at once since last asked (and start counting again)."""
    return int(httpx.get(f"{url}/in-flight", timeout=TIMEOUT).json()["max_in_flight"])


async def _async_run(url: str, prompts: int, concurrency: int) -> float:
    """One async batch: its wall seconds; raises if any prompt failed."""
    async with AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=TIMEOUT) as client:
        start = time.perf_counter()
        batch = client.complete_many(MODEL, ["p"] * prompts, concurrency=concurrency, max_tokens=1)
        completed = sum([result.ok async for result in batch])
        seconds = time.perf_counter() - start
    if completed != prompts:
        raise RuntimeError(f"async complete_many finished {completed} of {prompts} prompts")
    return seconds


def _sync_run(client: Scale, prompts: int, concurrency: int) -> float:
    """One sync batch: its wall seconds; raises if any prompt failed or hung past the timeout."""
    start = time.perf_counter()
    completed = sum(r.ok for r in client.complete_many(MODEL, ["p"] * prompts, concurrency=concurrency))
    if completed != prompts:
        raise RuntimeError(f"sync complete_many finished {completed} of {prompts} prompts")
    return time.perf_counter() - start


def flight_rows(url: str, sizes: Sizes) -> list[Row]:
    """Async wall time against the ideal, async peak in flight, sync peak in flight over many runs."""
    prompts, concurrency, delay = sizes.flight_prompts, sizes.flight_async, sizes.flight_delay
    ideal = math.ceil(prompts / concurrency) * delay
    _peak(url)
    walls, peaks = [], []
    for _ in range(sizes.flight_runs):
        walls.append(asyncio.run(_async_run(url, prompts, concurrency)))
        peaks.append(float(_peak(url)))
    sync_peaks, sync_walls = [], []
    with Scale(api_key=KEY, account_id=ACCOUNT, base_url=url, timeout=TIMEOUT) as client:
        for _ in range(sizes.flight_sync_runs):
            sync_walls.append(_sync_run(client, sizes.flight_sync_prompts, sizes.flight_sync))
            sync_peaks.append(float(_peak(url)))
    name = f"{prompts:,} prompts x {delay:g} s ({math.ceil(prompts / concurrency)} rounds)"
    sync_name = f"{sizes.flight_sync_prompts:,} prompts x {delay:g} s"
    return [
        Row(
            f"async complete_many {name} @{concurrency}",
            "s wall",
            Figure(tuple(walls)),
            "ideal",
            Figure((ideal,)),
            target=1.3,
        ),
        Row(
            f"async complete_many in flight @{concurrency}",
            "requests in flight",
            Figure(tuple(peaks)),
            "concurrency",
            Figure((float(concurrency),)),
            target=1.0,
            compare="floor",
        ),
        Row(
            f"sync complete_many in flight @{sizes.flight_sync}, {sizes.flight_sync_runs} runs",
            "requests in flight",
            Figure(tuple(sync_peaks)),
            "concurrency",
            Figure((float(sizes.flight_sync),)),
            target=1.0,
            compare="floor",
            note=(
                f"Scale.complete_many, {sync_name}: {sizes.flight_sync_runs} runs without a hang or an"
                f" error, {statistics.median(sync_walls):.2f} s each (median)"
            ),
        ),
    ]
