"""``make bench``: the wrapper's speed and memory against plain httpx, httpx-sse and aiohttp.

Starts the fixed-body server (``server.py``) in its own process pinned to the last CPU, pins this
process (the client) to the others, runs every row, prints the table and writes it as JSON.
``--quick`` runs every row at tiny sizes (the smoke test's mode: figures, but meaningless ones), but
the Ray rows, whose cluster takes a minute to start, and the shared-limit rows, whose processes take
as long to start, unless asked for with ``--only ray`` or ``--only shared``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _stats import FULL, QUICK, Row, Sizes
from row_async import async_rows
from row_batch import batch_rows
from row_cache import cache_rows
from row_flight import flight_rows
from row_import import import_rows
from row_limits import limit_rows
from row_router import router_rows
from row_shared import shared_rows
from row_stream import stream_rows
from row_streams import stream_load_rows
from row_sync import sync_rows
from row_tls import tls_rows
from server import Server, serve, split_cpus

ROOT = Path(__file__).resolve().parents[2]
SLOW = {"ray", "shared"}  # groups that take minutes whatever the sizes: a Ray cluster starting its actors,
# the shared-limit rows' nine runs of processes started side by side (tests/test_shared_limits.py runs
# them at the suite's sizes)


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _figure(row: Row, which: str) -> str:
    figure = row.wrapper if which == "wrapper" else row.baseline
    low, high = min(figure.samples), max(figure.samples)
    return f"{_number(figure.median)} ({_number(low)}-{_number(high)})"


def _outcome(row: Row) -> tuple[str, str, str]:
    """The ratio (or difference), target and met? cells."""
    if row.compare == "delta":
        unit = "MB" if "MB" in row.unit else "µs"
        value, target = f"{row.value:+.1f} {unit}", f"≤ +{row.target:g} {unit}"
    elif row.compare == "share":
        value, target = f"{row.value:.1%}", f"≤ {row.target:.0%}"
    elif row.compare == "floor":
        value, target = f"{row.value:.2f}x (worst run)", f"≥ {row.target:g}x"
    elif row.compare == "within":
        value, target = f"{row.value:.2f}x", f"1 ± {row.target:g}x"
    elif row.compare == "paired":
        value, target = f"{row.value:.2f}x (runs paired)", f"≤ {row.target:g}x"
    else:
        value, target = f"{row.value:.2f}x", "—" if row.target is None else f"≤ {row.target:g}x"
    met = {None: "—", True: "yes", False: "**no**"}[row.met]
    return value, target, met


def table(rows: list[Row]) -> str:
    """The results as a Markdown table: figures are medians with (min-max) of the runs."""
    lines = [
        "| row | unit | wrapper | baseline | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        baseline = f"{row.baseline_name}: {_figure(row, 'baseline')}"
        cells = [row.name, row.unit, _figure(row, "wrapper"), baseline, *_outcome(row)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {row.name}: {row.note}" for row in rows if row.note]
    return "\n".join(lines + (["", *notes] if notes else []))


def _flight(sizes: Sizes, cpus: set[int] | None) -> list[Row]:
    """The in-flight rows, against a second server that holds every answer ``flight_delay`` seconds."""
    with serve(2, cpus, delay=sizes.flight_delay) as slow:
        return flight_rows(slow.url, sizes)


def _streams(sizes: Sizes, cpus: set[int] | None) -> list[Row]:
    """The concurrent-streams row, against a server that holds every answer ``stream_delay`` seconds."""
    with serve(sizes.stream_chunks, cpus, delay=sizes.stream_delay) as slow:
        return stream_load_rows(slow.url, sizes)


def _ray(url: str, sizes: Sizes) -> list[Row]:
    """The Ray rows, importing Ray only when they run: the other rows' memory figures go without it."""
    from ray_rows import ray_rows

    return ray_rows(url, sizes)


def _groups(server: Server, sizes: Sizes, cpus: set[int] | None) -> dict[str, Callable[[], list[Row]]]:
    return {
        "sync": lambda: sync_rows(server.url, sizes),
        "async": lambda: async_rows(server, sizes),
        "stream": lambda: stream_rows(server.url, sizes),
        "streams": lambda: _streams(sizes, cpus),
        "import": lambda: import_rows(sizes),
        "batch": lambda: batch_rows(server.url, sizes),
        "flight": lambda: _flight(sizes, cpus),
        "limits": lambda: limit_rows(sizes),
        "router": lambda: router_rows(sizes),
        "cache": lambda: cache_rows(server.url, sizes),
        "tls": lambda: tls_rows(sizes, cpus),
        "shared": lambda: shared_rows(sizes),
        "ray": lambda: _ray(server.url, sizes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes: checks the scripts run, measures nothing (Ray and shared-limit rows: --only)",
    )
    parser.add_argument(
        "--json", type=Path, default=ROOT / "bench-results.json", help="where to write the results"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=[
            "sync",
            "async",
            "stream",
            "streams",
            "import",
            "batch",
            "flight",
            "limits",
            "router",
            "cache",
            "tls",
            "shared",
            "ray",
        ],
        help="run these rows only (repeatable)",
    )
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    client_cpus, server_cpus = split_cpus()
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    rows: list[Row] = []
    with serve(sizes.chunks, server_cpus) as server:
        for name, group in _groups(server, sizes, server_cpus).items():
            if (args.only and name not in args.only) or (args.quick and name in SLOW and not args.only):
                continue
            group_started = time.perf_counter()
            rows += group()
            print(f"{name}: {time.perf_counter() - group_started:.0f} s", file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    print(table(rows))
    pinned = (
        f"client on CPUs {sorted(client_cpus)}, server on CPUs {sorted(server_cpus)}"
        if server_cpus
        else "unpinned"
    )
    print(f"\ntotal: {total:.0f} s ({pinned})")
    report = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "client_cpus": sorted(client_cpus or []),
        "server_cpus": sorted(server_cpus or []),
        "sizes": dataclasses.asdict(sizes),
        "total_seconds": total,
        "rows": [row.as_json() for row in rows],
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
