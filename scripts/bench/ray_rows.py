"""The Ray rows: ``wrapper.ray.complete_dataset`` on a local cluster, its shared limit handed out in leases.

- Rows a second with 4 workers at a limit so high (10,000,000/min) that pacing never waits, against
  the bench server: the shared limit must cost little next to the same workers each pacing a
  quarter of it alone with an in-process ``Pacer`` (no limit shared at all). Timed from the first
  block of results, so that starting the actor pool (the same for both) is not in the figure.
- Calls to the coordinator a request, in those runs.
- A limit of ``limit_rpm`` over 4 workers against the sandbox enforcing that same limit: the rate
  achieved (first request to last at the sandbox) should be the limit, with hardly a 429.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import ray
import ray.data
from _apis import ACCOUNT, KEY, MODEL
from _stats import Figure, Row, Sizes, interleaved
from ray import cloudpickle

import wrapper.ray
from wrapper.pacing import Pacer
from wrapper.ray._leases import Grant, Report
from wrapper.sandbox import Sandbox

__all__ = ["ray_rows"]

WORKERS = 4
FAST = 10_000_000  # requests a minute: pacing never waits
SANDBOX_MODEL = "llama-3-8b-instruct"

cloudpickle.register_pickle_by_value(__import__(__name__))  # Ray's workers cannot import this module


class _PacedAlone(wrapper.ray._CompletionWorker):
    """The baseline's worker: the same, pacing its quarter of the limit alone, no coordinator called."""

    def __init__(self, **arguments: Any) -> None:
        super().__init__(**arguments)
        self._limiter = Pacer(FAST / WORKERS)


class _Counted(wrapper.ray._LeaseCoordinator):
    """The coordinator, writing to ``COUNT`` how often it was called: the driver holds no handle to ask it."""

    COUNT = Path(tempfile.gettempdir()) / "bench-lease-calls"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._calls = 0

    def grant(self, worker: str, report: Report) -> Grant:
        self._calls += 1
        self.COUNT.write_text(str(self._calls))
        return super().grant(worker, report)


def _dataset(rows: int) -> ray.data.Dataset:
    return ray.data.from_items([{"id": i, "prompt": f"Alice {i}"} for i in range(rows)])


def _complete(url: str, rows: int, rpm: float, concurrency: int) -> Iterator[Any]:
    out = wrapper.ray.complete_dataset(
        _dataset(rows),
        "scale",
        MODEL if rpm == FAST else SANDBOX_MODEL,
        workers=WORKERS,
        concurrency=concurrency,
        requests_per_minute=rpm,
        client_options={"api_key": KEY, "account_id": ACCOUNT, "base_url": url, "timeout": 30},
        max_tokens=4,
    )
    done = failed = 0
    for block in out.iter_batches(batch_size=None, batch_format="pyarrow"):
        done += block.num_rows
        failed += block.num_rows - block.column("error").null_count
        yield block
    if done != rows or failed:
        raise RuntimeError(f"{done} of {rows} rows came back, {failed} failed")


def _rows_per_second(url: str, rows: int, concurrency: int) -> float:
    """Rows a second after the first block of results came back."""
    first = None
    counted = 0
    for block in _complete(url, rows, FAST, concurrency):
        if first is None:
            first = time.perf_counter()
        else:
            counted += block.num_rows
    assert first is not None
    return counted / (time.perf_counter() - first)


@contextlib.contextmanager
def _arrivals(sandbox: Sandbox) -> Iterator[list[float]]:
    """When each vendor-route request reached the sandbox, while in the block."""
    times: list[float] = []
    counter = sandbox.app.counter
    enter = counter.enter

    def record() -> None:
        times.append(time.monotonic())
        enter()

    counter.enter = record  # type: ignore[method-assign]
    try:
        yield times
    finally:
        del counter.enter


def _paced(rpm: int, rows: int) -> tuple[float, int, int]:
    """(achieved requests per minute, requests the sandbox saw, 429s it sent) with the limit shared."""
    with Sandbox(rpm=rpm) as sandbox, _arrivals(sandbox) as times:
        for _ in _complete(sandbox.scale_base_url, rows, rpm, 16):
            pass
        stats = sandbox.stats()
    return (len(times) - 1) * 60 / (times[-1] - times[0]), stats.requests, stats.rate_limited


def ray_rows(url: str, sizes: Sizes) -> list[Row]:
    """Leases against per-worker pacers at a rate that never waits, calls a request, and a limit kept."""
    rows, runs, concurrency = 10 * sizes.batch_small, sizes.batch_runs, sizes.concurrency
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    calls: list[float] = []

    def leased() -> float:
        _Counted.COUNT.write_text("0")
        with mock.patch.object(wrapper.ray, "_LeaseCoordinator", _Counted):
            per_second = _rows_per_second(url, rows, concurrency)
        calls.append(float(_Counted.COUNT.read_text()))
        return per_second

    def alone() -> float:
        with mock.patch.object(wrapper.ray, "_CompletionWorker", _PacedAlone):
            return _rows_per_second(url, rows, concurrency)

    try:
        figures = interleaved(runs, {"leased": leased, "alone": alone})
        rpm = sizes.limit_rpm
        paced, requests, limited = _paced(rpm, sizes.paced_prompts)
    finally:
        ray.shutdown()
        _Counted.COUNT.unlink(missing_ok=True)
    fast = f"{WORKERS} workers @{concurrency}, {FAST:,}/min, {rows:,} rows"
    paced_name = (
        f"{rpm:,}/min set over {WORKERS} workers @16, the sandbox's limit; {sizes.paced_prompts:,} rows"
    )
    return [
        Row(
            f"ray complete_dataset rows/s: {fast}",
            "rows/s",
            figures["leased"],
            "a Pacer per worker",
            figures["alone"],
            target=0.8,
            compare="floor",
        ),
        Row(
            f"ray coordinator calls a request: {fast}",
            "calls / requests",
            Figure(tuple(calls)),
            "requests",
            Figure((float(rows),)),
            target=0.05,
            compare="share",
        ),
        Row(
            f"ray rate limit paced, rate: {paced_name}",
            "requests/min",
            Figure((paced,)),
            "set",
            Figure((float(rpm),)),
            target=0.1,
            compare="within",
        ),
        Row(
            f"ray rate limit paced, 429s: {paced_name}",
            "429s / requests",
            Figure((float(limited),)),
            "requests",
            Figure((float(requests),)),
            target=0.01,
            compare="share",
        ),
    ]
