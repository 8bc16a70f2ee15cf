"""Leaks and cancellation: whatever way a call ends, no socket, file descriptor or task outlives it.

Each test counts this process's file descriptors and its TCP sockets connected to the sandbox before and
after, runs the event loop in debug mode with anything the ``asyncio`` logger reports (unclosed
transports, destroyed pending tasks, unretrieved exceptions) counted as a failure, and collects garbage
so that ``ResourceWarning``s surface inside the test (pytest turns them into errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from wrapper.errors import APIConnectionError
from wrapper.sandbox import Sandbox

from ._clients import MODELS, sandbox_client

SCALE_MODEL = MODELS["scale"]
SETTLE = 1.0
"""Seconds a closed client's sockets may take to go (aiohttp closes its transports on a later loop turn)."""


def _tcp_ports() -> dict[str, tuple[int, int]]:
    """Local and remote port of every TCP socket of this network namespace, by inode."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
                ports[fields[9]] = (local, remote)
    return ports


def _own_fds(port: int) -> tuple[set[str], set[str]]:
    """This process's file descriptors but the sandbox's side of its connections (it runs in this process),
    and among them, the sockets connected to the sandbox."""
    ports = _tcp_ports()
    fds, to_sandbox = set(), set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the directory listing's own descriptor, already closed
            continue
        local, remote = ports.get(target[8:-1], (0, 0)) if target.startswith("socket:[") else (0, 0)
        if local != port:
            fds.add(f"{fd} -> {target}")
        if remote == port:
            to_sandbox.add(f"{fd} -> {target}")
    return fds, to_sandbox


class Leaks:
    """What a test must leave as it found: its file descriptors, no socket to the sandbox, asyncio silent."""

    def __init__(self, shared_sandbox: Sandbox) -> None:
        self.port = int(shared_sandbox.url.rsplit(":", 1)[1])
        self.records: list[logging.LogRecord] = []
        self.baseline()

    def baseline(self) -> None:
        """Take the file descriptors open now as the ones allowed at the end."""
        self.fds, _ = _own_fds(self.port)

    def check(self) -> None:
        deadline = time.monotonic() + SETTLE
        while True:
            gc.collect()
            fds, to_sandbox = _own_fds(self.port)
            if (fds <= self.fds and not to_sandbox) or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert to_sandbox == set(), "a client socket to the sandbox is still open"
        assert fds - self.fds == set(), "file descriptors leaked"
        assert [r.getMessage() for r in self.records] == []

    async def acheck(self) -> None:
        # Closing schedules work on later loop turns: transports close, and the nested async generators of
        # a stream (httpx_sse's, httpx's, the transport's) are finalized one after another, each in a task.
        deadline = time.monotonic() + SETTLE
        while asyncio.all_tasks() != {asyncio.current_task()} and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.001)
        assert asyncio.all_tasks() == {asyncio.current_task()}, asyncio.all_tasks()
        self.check()


class _Collect(logging.Handler):
    """Keeps the records of WARNING and up in ``records``."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def leaks(fault_sandbox: Sandbox) -> Iterator[Leaks]:
    """A ``Leaks`` baseline taken now; asyncio's logger is watched (WARNING and up) until the test ends."""
    watch = Leaks(fault_sandbox)
    handler = _Collect(watch.records)
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    try:
        yield watch
    finally:
        logger.removeHandler(handler)


@pytest.fixture
async def aleaks(leaks: Leaks) -> Leaks:
    """``leaks`` for an async test: the baseline taken inside its event loop, which runs in debug mode."""
    leaks.baseline()
    return leaks


def _async_client(fault_sandbox: Sandbox, api: str, transport: str) -> Any:
    """An async client on the default (aiohttp) transport or on an ``httpx.AsyncClient`` of our own."""
    http = None if transport == "aiohttp" else httpx.AsyncClient()
    return sandbox_client(fault_sandbox, api, asynchronous=True, http_client=http)


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and see it end by that cancellation."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _until_arrived(fault_sandbox: Sandbox, count: int = 1) -> None:
    """Wait until ``count`` requests reached the sandbox since the test began (its stats were reset)."""
    while fault_sandbox.stats().requests < count:  # noqa: ASYNC110 - the sandbox offers no event to wait on
        await asyncio.sleep(0.005)


APIS = pytest.mark.parametrize("api", ["scale", "gradient"])
TRANSPORTS = pytest.mark.parametrize("transport", ["aiohttp", "httpx"])


@APIS
@TRANSPORTS
async def test_cancelling_complete_mid_flight_leaves_nothing_open(
    fault_sandbox: Sandbox, aleaks: Leaks, api: str, transport: str
) -> None:
    fault_sandbox.inject(delay=2, api=api)
    client = _async_client(fault_sandbox, api, transport)
    async with client:
        task = asyncio.create_task(client.complete(MODELS[api], "Alice was beginning to get very tired"))
        await _until_arrived(fault_sandbox)
        await _cancelled(task)
        # the client still works after a cancelled call
        assert (await client.complete(MODELS[api], "Alice", **_short(api))).text is not None
    await aleaks.acheck()


@TRANSPORTS
async def test_cancelling_a_stream_mid_flight_leaves_nothing_open(
    fault_sandbox: Sandbox, aleaks: Leaks, transport: str
) -> None:
    """Cancelled with a chunk in hand, between chunks: ``aclosing`` (as ``stream`` documents) closes it."""
    client = _async_client(fault_sandbox, "scale", transport)
    got_one = asyncio.Event()

    async def consume() -> None:
        async with contextlib.aclosing(client.stream(SCALE_MODEL, "Alice", max_tokens=50)) as chunks:
            async for _ in chunks:
                got_one.set()
                await asyncio.Event().wait()  # a consumer stuck on something else

    async with client:
        task = asyncio.create_task(consume())
        await got_one.wait()
        await _cancelled(task)
    await aleaks.acheck()


@TRANSPORTS
async def test_cancelling_a_stream_before_its_headers_leaves_nothing_open(
    fault_sandbox: Sandbox, aleaks: Leaks, transport: str
) -> None:
    fault_sandbox.inject(delay=2, api="scale")
    client = _async_client(fault_sandbox, "scale", transport)

    async def consume() -> list[Any]:
        return [chunk async for chunk in client.stream(SCALE_MODEL, "Alice", max_tokens=5)]

    async with client:
        task = asyncio.create_task(consume())
        await _until_arrived(fault_sandbox)
        await _cancelled(task)
    await aleaks.acheck()


@TRANSPORTS
async def test_an_abandoned_async_stream_is_closed_when_collected(
    fault_sandbox: Sandbox, aleaks: Leaks, transport: str
) -> None:
    """Left mid-way without ``aclosing``: the loop's async-generator finalizer closes it once collected."""
    client = _async_client(fault_sandbox, "scale", transport)
    async with client:
        chunks = client.stream(SCALE_MODEL, "Alice", max_tokens=50)
        await anext(chunks)
        del chunks
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
    await aleaks.acheck()


@APIS
def test_breaking_out_of_a_sync_stream_leaves_nothing_open(
    fault_sandbox: Sandbox, leaks: Leaks, api: str
) -> None:
    with sandbox_client(fault_sandbox, api) as client:
        for _ in client.stream(MODELS[api], "Alice", **_short(api)):
            break
        for _ in client.stream(MODELS[api], "Alice", **_short(api)):
            pass
    leaks.check()


def test_a_stream_cut_by_the_server_leaves_nothing_open(fault_sandbox: Sandbox, leaks: Leaks) -> None:
    fault_sandbox.inject(cut=2, api="scale")
    with sandbox_client(fault_sandbox, "scale") as client:
        chunks = client.stream(SCALE_MODEL, "Alice", max_tokens=20)
        assert len([next(chunks), next(chunks)]) == 2
        with pytest.raises(APIConnectionError):
            next(chunks)
    leaks.check()


@APIS
def test_closing_clients_and_their_copies_leaves_nothing_open(
    fault_sandbox: Sandbox, leaks: Leaks, api: str
) -> None:
    client = sandbox_client(fault_sandbox, api)
    copy = client.with_options(timeout=5.0, max_retries=0)
    client.complete(MODELS[api], "Alice", **_short(api))
    copy.complete(MODELS[api], "Alice", **_short(api))
    copy.close()
    client.close()
    client.close()  # twice is harmless
    leaks.check()


@APIS
@TRANSPORTS
async def test_closing_async_clients_leaves_nothing_open(
    fault_sandbox: Sandbox, aleaks: Leaks, api: str, transport: str
) -> None:
    client = _async_client(fault_sandbox, api, transport)
    results = await asyncio.gather(
        *(client.complete(MODELS[api], f"Alice {i}", **_short(api)) for i in range(8))
    )
    assert len(results) == 8
    await client.close()
    await aleaks.acheck()


@APIS
async def test_leaving_an_async_batch_early_cancels_its_requests(
    fault_sandbox: Sandbox, aleaks: Leaks, api: str
) -> None:
    fault_sandbox.inject(delay=2, api=api, count=100)
    client = _async_client(fault_sandbox, api, "aiohttp")
    async with client:

        async def prompts() -> AsyncIterator[str]:
            for i in range(50):
                yield f"Alice {i}"

        batch = client.complete_many(MODELS[api], prompts(), concurrency=4, return_exceptions=True)
        pending = asyncio.create_task(anext(batch))
        await _until_arrived(fault_sandbox, 4)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await batch.aclose()
    await aleaks.acheck()


def _short(api: str) -> dict[str, int]:
    return {"max_tokens": 3} if api == "scale" else {"max_generated_token_count": 3}
