"""The response cache: a warm hit against an uncached ``complete``, what a miss adds, and whether async
calls ever run a store call on the event loop; for the SQLite store and for Redis.

A hit's figure is wall time (what a re-run waits), against the same call sent to the bench's server.
A miss sends the request and stores the answer: its figure is the client's CPU time per call, against
the same calls with no cache (``delta``: the cost of the key, the look-up and the write). The async
row counts the store calls made on the event loop's thread during a batch of hits and misses (the
target: none). Redis's rows need ``redis-server`` on PATH; the bench starts one on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _apis import ACCOUNT, KEY, MAX_TOKENS, MODEL, PROMPT
from _stats import Figure, Row, Sizes, interleaved

from wrapper.cache import RedisStore, SQLiteStore, Store
from wrapper.scale import AsyncScale, Scale

__all__ = ["cache_rows"]


def _per_call(requests: int, call: Callable[[int], Any], clock: Callable[[], float]) -> Callable[[], float]:
    """A run: ``requests`` sequential calls (each told its number); its sample: microseconds per call."""
    offset = 0

    def run() -> float:
        nonlocal offset
        start = clock()
        for i in range(offset, offset + requests):
            call(i)
        offset += requests
        return (clock() - start) / requests * 1e6

    return run


@contextlib.contextmanager
def _redis() -> Iterator[str | None]:
    """A ``redis-server`` on a free loopback port, nothing saved to disk (None: not installed)."""
    executable = shutil.which("redis-server")
    if executable is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        arguments = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        process = subprocess.Popen(
            [executable, *arguments, "--dir", directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                        connection.sendall(b"PING\r\n")
                        if connection.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


class _Watched:
    """Wraps a store's ``load``/``save``, counting the calls made on one thread (the event loop's)."""

    def __init__(self, store: Store) -> None:
        self.on_loop = self.calls = 0
        self.loop_thread = 0
        self._lock = threading.Lock()
        for name in ("load", "save"):
            method = getattr(store, name)
            setattr(store, name, self._counted(method))

    def _counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any) -> Any:
            with self._lock:
                self.calls += 1
                self.on_loop += threading.get_ident() == self.loop_thread
            return method(*args)

        return counted


def _store_rows(label: str, url: str, make: Callable[[str], Store], sizes: Sizes) -> list[Row]:
    settings = {"api_key": KEY, "account_id": ACCOUNT, "base_url": url}
    requests = sizes.requests
    plain = Scale(**settings)
    cached = Scale(**settings, cache=make("hits"))
    missing = Scale(**settings, cache=make("misses"))
    with plain, cached, missing:

        def same(client: Scale) -> Callable[[int], Any]:
            return lambda _: client.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS)

        def each(client: Scale) -> Callable[[int], Any]:
            return lambda i: client.complete(MODEL, f"{PROMPT} {i}", max_tokens=MAX_TOKENS)

        cached.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS)  # the entry every hit reads
        for client in (plain, cached):  # connect, fill caches
            _per_call(max(requests // 10, 1), same(client), time.perf_counter)()
        hits = interleaved(
            sizes.runs,
            {
                "hit": _per_call(requests, same(cached), time.perf_counter),
                "sent": _per_call(requests, same(plain), time.perf_counter),
            },
        )
        misses = interleaved(
            sizes.runs,
            {
                "miss": _per_call(requests, each(missing), time.process_time),
                "sent": _per_call(requests, each(plain), time.process_time),
            },
        )
    return [
        Row(
            f"cache hit, {label}",
            "µs/call (wall)",
            hits["hit"],
            "uncached complete",
            hits["sent"],
            target=0.25,
        ),
        Row(
            f"cache miss, {label}",
            "µs CPU/call",
            misses["miss"],
            "uncached complete",
            misses["sent"],
            target=500.0,
            compare="delta",
            note="delta in µs: the key, the look-up and the write",
        ),
        _loop_row(label, settings, make("async"), sizes),
    ]


def _loop_row(label: str, settings: dict[str, str], store: Store, sizes: Sizes) -> Row:
    """Store calls on the event loop's thread during async batches of misses then hits (target: none)."""
    watched = _Watched(store)
    prompts = [f"{PROMPT} {i}" for i in range(sizes.requests)]

    async def batches() -> None:
        watched.loop_thread = threading.get_ident()
        async with AsyncScale(**settings, cache=store) as client:
            for _ in range(2):  # misses, then hits
                async for result in client.complete_many(
                    MODEL, prompts, concurrency=sizes.concurrency, max_tokens=MAX_TOKENS
                ):
                    assert result.ok

    asyncio.run(batches())
    on_loop, calls = Figure((float(watched.on_loop),)), Figure((float(watched.calls),))
    return Row(
        f"async cache, store calls on the loop, {label}",
        "calls",
        on_loop,
        "store calls",
        calls,
        target=0.0,
        compare="share",
    )


def cache_rows(url: str, sizes: Sizes) -> list[Row]:
    """The SQLite rows, then Redis's (when ``redis-server`` is installed)."""
    with tempfile.TemporaryDirectory() as directory:
        rows = _store_rows("SQLite", url, lambda name: SQLiteStore(Path(directory) / f"{name}.db"), sizes)
    with _redis() as redis_url:
        if redis_url is not None:
            rows += _store_rows(
                "Redis", url, lambda name: RedisStore(redis_url, prefix=f"bench:{name}:"), sizes
            )
    return rows
