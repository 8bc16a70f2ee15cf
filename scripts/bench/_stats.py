"""Figures (median, min, max of several runs), result rows and the sizes a bench run uses."""

from __future__ import annotations

import dataclasses
import gc
import statistics
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["FULL", "QUICK", "Figure", "Row", "Sizes", "interleaved"]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much work each row does and how many runs each figure is the median of."""

    requests: int  # sync and async rows: requests per run
    concurrency: int  # async row and batch: requests in flight
    chunks: int  # streaming row: SSE events in the stream
    runs: int  # runs per figure of the async and streaming rows
    cpu_requests: int  # sync rows (CPU per request): requests per run
    cpu_runs: int  # ... and runs per figure, each paired with the baseline's in its round
    import_runs: int
    batch_small: int
    batch_large: int
    batch_runs: int
    flight_prompts: int  # in-flight rows: prompts per batch, answered after flight_delay seconds
    flight_async: int  # the async batch's concurrency
    flight_sync: int  # the sync batch's concurrency
    flight_sync_prompts: int
    flight_delay: float
    flight_runs: int  # runs of the async batch
    flight_sync_runs: int  # runs of the sync batch (a hang or error in any fails the bench)
    limit_rpm: int  # the sandbox's requests per minute in the rate-limit rows
    paced_prompts: int
    adaptive_prompts: int  # the long adaptive batch: the limit kept over many cuts
    adaptive_concurrency: int
    short_prompts: int  # the short adaptive batch: how it opens (no burst of 429s)
    streams: int  # concurrent-streams row: streams per run, of stream_chunks events each,
    stream_chunks: int
    stream_concurrency: int  # ... from this many tasks, the server holding each answer stream_delay s
    stream_delay: float
    router_rpm: tuple[int, ...]  # router row: each route's limit, kept by a sandbox of its own
    router_prompts: int
    cold_requests: int  # TLS rows: requests at once from a new client, each answer held cold_delay s
    cold_delay: float
    cold_runs: int
    clients: int  # TLS construction row: clients built and closed per run
    shared_rpm: int  # shared-limit rows: the limit 4 processes share, kept by the sandbox
    shared_prompts: int  # ... and the prompts they complete between them
    shared_tpm: int  # the tokens a minute 2 batches share
    shared_adaptive_rpm: int  # the sandbox's limit, which processes told none find together
    shared_adaptive_seconds: int  # ... over a run this long (at that limit)
    shared_event_at: float  # seconds into a run a process is killed, or Redis stopped
    shared_outage: float  # seconds Redis is stopped for
    shared_trips_rpm: int  # the limit at which calls to Redis are counted


FULL = Sizes(
    requests=2000,
    concurrency=64,
    chunks=5000,
    runs=7,
    cpu_requests=250,
    cpu_runs=40,
    import_runs=9,
    batch_small=2000,
    batch_large=200_000,
    batch_runs=3,
    flight_prompts=1500,
    flight_async=500,
    flight_sync=200,
    flight_sync_prompts=600,
    flight_delay=1.0,
    flight_runs=3,
    flight_sync_runs=20,
    limit_rpm=1200,
    paced_prompts=600,
    adaptive_prompts=1200,
    adaptive_concurrency=64,
    short_prompts=300,
    streams=400,
    stream_chunks=50,
    stream_concurrency=200,
    stream_delay=0.2,
    router_rpm=(600, 900, 1500),
    router_prompts=1200,
    cold_requests=500,
    cold_delay=1.0,
    cold_runs=3,
    clients=50,
    shared_rpm=600,
    shared_prompts=1200,
    shared_tpm=12_000,
    shared_adaptive_rpm=1200,
    shared_adaptive_seconds=120,
    shared_event_at=30.0,
    shared_outage=5.0,
    shared_trips_rpm=1200,
)
QUICK = Sizes(
    requests=20,
    concurrency=4,
    chunks=50,
    runs=2,
    cpu_requests=10,
    cpu_runs=2,
    import_runs=2,
    batch_small=20,
    batch_large=200,
    batch_runs=1,
    flight_prompts=40,
    flight_async=20,
    flight_sync=10,
    flight_sync_prompts=20,
    flight_delay=0.2,
    flight_runs=1,
    flight_sync_runs=2,
    limit_rpm=6000,
    paced_prompts=60,
    adaptive_prompts=100,
    adaptive_concurrency=8,
    short_prompts=30,
    streams=20,
    stream_chunks=5,
    stream_concurrency=10,
    stream_delay=0.05,
    router_rpm=(3000, 3000, 6000),
    router_prompts=100,
    cold_requests=20,
    cold_delay=0.1,
    cold_runs=1,
    clients=3,
    shared_rpm=6000,
    shared_prompts=80,
    shared_tpm=120_000,
    shared_adaptive_rpm=6000,
    shared_adaptive_seconds=2,
    shared_event_at=0.5,
    shared_outage=0.5,
    shared_trips_rpm=6000,
)


@dataclasses.dataclass(frozen=True)
class Figure:
    """The median of several runs' samples, with the smallest and largest."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def as_json(self) -> dict[str, Any]:
        return {
            "median": self.median,
            "min": min(self.samples),
            "max": max(self.samples),
            "runs": self.samples,
        }


def interleaved(runs: int, variants: Mapping[str, Callable[[], float]]) -> dict[str, Figure]:
    """Run every variant ``runs`` times, round-robin so drift in machine load hits them alike.

    Each call returns one sample; garbage is collected before each so no run pays for another's.
    """
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, run in variants.items():
            gc.collect()
            samples[name].append(run())
    return {name: Figure(tuple(values)) for name, values in samples.items()}


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table: the wrapper's figure against a baseline's, and the target it must meet.

    ``compare`` is ``"ratio"`` (wrapper / baseline <= target), ``"paired"`` (the median of the runs'
    ratios, each of a wrapper run to the baseline's run in the same round of ``interleaved``, <= target:
    for CPU per request, which drifts with the machine's load by more than the clients differ, from
    round to round), ``"delta"`` (wrapper - baseline <=
    target), ``"floor"`` (wrapper / baseline >= target, judged on the worst run), ``"within"``
    (wrapper / baseline within 1 +/- target) or ``"share"`` (wrapper / baseline <= target, shown as
    a percentage); ``target`` None marks a row shown for information only.
    """

    name: str
    unit: str
    wrapper: Figure
    baseline_name: str
    baseline: Figure
    target: float | None
    compare: str = "ratio"
    note: str = ""

    @property
    def value(self) -> float:
        if self.compare == "delta":
            return self.wrapper.median - self.baseline.median
        if self.compare == "floor":
            return min(self.wrapper.samples) / self.baseline.median
        if self.compare == "paired":
            return statistics.median(
                ours / theirs
                for ours, theirs in zip(self.wrapper.samples, self.baseline.samples, strict=True)
            )
        return self.wrapper.median / self.baseline.median

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        if self.compare == "floor":
            return self.value >= self.target
        if self.compare == "within":
            return abs(self.value - 1) <= self.target
        return self.value <= self.target

    def as_json(self) -> dict[str, Any]:
        return {
            "row": self.name,
            "unit": self.unit,
            "wrapper": self.wrapper.as_json(),
            "baseline_name": self.baseline_name,
            "baseline": self.baseline.as_json(),
            "compare": self.compare,
            "value": self.value,
            "target": self.target,
            "met": self.met,
            "note": self.note,
        }
