"""Rows a second through ``wrapper.ray.complete_dataset`` on a local cluster, next to one process.

Both sides talk to the sandbox, in a process of its own, with every answer delayed by ``--delay``
seconds (the shape of a real LLM call: the time is the server's, not the client's) at the same
total concurrency:
``--workers`` actors of ``--concurrency`` each, against one ``AsyncScale.complete_many`` with
``workers * concurrency``. Ray's figure includes starting its actor pool, as a job's would; the
time until the first block of results came shows how much of it that was.

    python scripts/bench/ray_rows.py --rows 2000 --workers 2 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import ray
import ray.data

from wrapper.ray import complete_dataset
from wrapper.scale import AsyncScale

MODEL = "llama-3-8b-instruct"
OPTIONS = {"api_key": "bench-key", "account_id": "bench"}


@contextlib.contextmanager
def _sandbox(delay: float) -> Iterator[str]:
    """``python -m wrapper.sandbox`` on a free port, every answer delayed by ``delay`` s: its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "wrapper.sandbox", "--port", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(500):
            with contextlib.suppress(httpx.TransportError):
                httpx.post(f"{url}/_sandbox/faults", json={"delay": delay, "rate": 1.0}).raise_for_status()
                break
            time.sleep(0.05)
        else:
            raise SystemExit("the sandbox did not start")
        yield url
    finally:
        server.terminate()
        server.wait(10)


def _prompts(rows: int) -> list[str]:
    return [f"Alice {i}" for i in range(rows)]


def ray_rows_per_second(url: str, rows: int, workers: int, concurrency: int) -> tuple[float, float]:
    """Rows a second over the whole run, and the seconds until the first block of results came."""
    dataset = ray.data.from_items([{"id": i, "prompt": p} for i, p in enumerate(_prompts(rows))])
    started = time.perf_counter()
    out = complete_dataset(
        dataset,
        "scale",
        MODEL,
        workers=workers,
        concurrency=concurrency,
        client_options={**OPTIONS, "base_url": url, "timeout": 30},
        max_tokens=4,
    )
    first, done, failed = 0.0, 0, 0
    for block in out.iter_batches(batch_size=None, batch_format="pyarrow"):
        first = first or time.perf_counter() - started
        done += block.num_rows
        failed += block.num_rows - block.column("error").null_count
    elapsed = time.perf_counter() - started
    if done != rows or failed:
        raise SystemExit(f"{done} of {rows} rows came back, {failed} failed")
    return rows / elapsed, first


async def _one_process(url: str, rows: int, concurrency: int) -> float:
    async with AsyncScale(**OPTIONS, base_url=url, timeout=30) as scale:
        started = time.perf_counter()
        results = scale.complete_many(MODEL, _prompts(rows), concurrency=concurrency, max_tokens=4)
        done = [r async for r in results if r.ok]
        elapsed = time.perf_counter() - started
    if len(done) != rows:
        raise SystemExit("some prompts failed")
    return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64, help="per Ray worker")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the sandbox takes per answer")
    args = parser.parse_args()
    total = args.workers * args.concurrency
    ideal = total / args.delay
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        with _sandbox(args.delay) as url:
            single = asyncio.run(_one_process(url, args.rows, total))
            on_ray, first = ray_rows_per_second(url, args.rows, args.workers, args.concurrency)
    finally:
        ray.shutdown()
    print(f"{args.rows} rows, {args.delay:g} s per answer, concurrency {total} (ideal {ideal:,.0f} rows/s)")
    print(f"  one process, complete_many(concurrency={total}): {single:,.1f} rows/s")
    print(
        f"  Ray, complete_dataset(workers={args.workers}, concurrency={args.concurrency}): "
        f"{on_ray:,.1f} rows/s ({on_ray / single:.2f}x), the first results after {first:.1f} s"
    )


if __name__ == "__main__":
    main()
