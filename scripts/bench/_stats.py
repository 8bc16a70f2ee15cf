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
    runs: int  # runs per figure of the sync, async and streaming rows
    import_runs: int
    batch_small: int
    batch_large: int
    batch_runs: int


FULL = Sizes(
    requests=2000,
    concurrency=64,
    chunks=5000,
    runs=7,
    import_runs=9,
    batch_small=2000,
    batch_large=200_000,
    batch_runs=3,
)
QUICK = Sizes(
    requests=20,
    concurrency=4,
    chunks=50,
    runs=2,
    import_runs=2,
    batch_small=20,
    batch_large=200,
    batch_runs=1,
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

    ``compare`` is ``"ratio"`` (wrapper / baseline <= target) or ``"delta"`` (wrapper - baseline <=
    target); ``target`` None marks a row shown for information only.
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
        return self.wrapper.median / self.baseline.median

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.value <= self.target

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
