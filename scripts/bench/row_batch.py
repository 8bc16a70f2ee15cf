"""Batch memory: peak RSS of ``complete_many`` over a small and a 100x larger prompt file.

Each run is a fresh child process (``python row_batch.py --child ...``) that streams the first N
lines of one prompts file through ``AsyncScale.complete_many`` and reports its own ``ru_maxrss``.
Prompts and results are never held, so the larger batch should peak where the smaller one does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _apis import ACCOUNT, KEY, MAX_TOKENS, MODEL
from _stats import Row, Sizes, interleaved

__all__ = ["batch_rows"]


def _child_peak_mb(
    url: str, prompts: Path, count: int, concurrency: int, seconds: list[float]
) -> Callable[[], float]:
    """A run: a child completes the first ``count`` prompts; sample: its peak RSS (its time: ``seconds``)."""

    def run() -> float:
        command = [sys.executable, __file__, "--child", url, str(prompts), str(count), str(concurrency)]
        report = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        if report["completed"] != count:
            raise RuntimeError(f"complete_many finished {report['completed']} of {count} prompts")
        seconds.append(report["seconds"])
        return float(report["peak_rss_mb"])

    return run


def batch_rows(url: str, sizes: Sizes) -> list[Row]:
    """The one memory row: the large batch's peak RSS against the small one's."""
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp, "prompts.txt")
        with prompts.open("w") as out:
            out.writelines(
                f"Prompt {index}: what is the capital of France?\n" for index in range(sizes.batch_large)
            )
        seconds: list[float] = []
        figures = interleaved(
            sizes.batch_runs,
            {
                sizes.batch_small: _child_peak_mb(url, prompts, sizes.batch_small, sizes.concurrency, []),
                sizes.batch_large: _child_peak_mb(
                    url, prompts, sizes.batch_large, sizes.concurrency, seconds
                ),
            },
        )
    rate = sizes.batch_large / statistics.median(seconds)
    return [
        Row(
            f"batch complete_many {sizes.batch_large:,} vs {sizes.batch_small:,} prompts",
            "MB peak RSS",
            figures[sizes.batch_large],
            f"{sizes.batch_small:,} prompts",
            figures[sizes.batch_small],
            target=10.0,
            compare="delta",
            note=f"AsyncScale.complete_many at concurrency {sizes.concurrency}: {rate:,.0f} prompts/s",
        )
    ]


async def _complete_file(url: str, prompts: Path, count: int, concurrency: int) -> int:
    from wrapper.scale import AsyncScale

    completed = 0
    with prompts.open() as lines:
        wanted = (line.rstrip("\n") for line in itertools.islice(lines, count))
        async with AsyncScale(api_key=KEY, account_id=ACCOUNT, base_url=url) as client:
            async for result in client.complete_many(
                MODEL, wanted, concurrency=concurrency, max_tokens=MAX_TOKENS
            ):
                completed += result.ok
    return completed


def _child() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", metavar="URL", required=True)
    parser.add_argument("prompts", type=Path)
    parser.add_argument("count", type=int)
    parser.add_argument("concurrency", type=int)
    args = parser.parse_args()
    start = time.perf_counter()
    completed = asyncio.run(_complete_file(args.child, args.prompts, args.count, args.concurrency))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    print(
        json.dumps(
            {"completed": completed, "peak_rss_mb": peak_kb / 1024, "seconds": time.perf_counter() - start}
        )
    )


if __name__ == "__main__":
    _child()
