"""A client's life: a closed one refuses calls and opens nothing; an async one works from any event loop.

The cross-loop checks run in a fresh interpreter with warnings as errors and asyncio's debug mode,
so that an unclosed session, socket or transport (which aiohttp and asyncio report on stderr when
they are collected) fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import httpx
import pytest
from helpers import CLASSES, CREDENTIALS, call, collect

from wrapper import CallHooks, ClientClosedError, Completion
from wrapper.errors import APIError, InternalServerError
from wrapper.sandbox import Sandbox

pytestmark = [
    pytest.mark.usefixtures("library"),  # every test on httpx and on httpx2
    pytest.mark.long("parallel"),  # 44-51 s of one process in make test
]

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}


def base_url(sandbox: Sandbox, provider: str) -> str:
    return sandbox.scale_base_url if provider == "scale" else sandbox.gradient_base_url


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_a_closed_client_refuses_every_call_and_sends_nothing(
    sandbox: Sandbox, provider: str, mode: str
) -> None:
    client = CLASSES[provider][mode == "async"](**CREDENTIALS[provider], base_url=base_url(sandbox, provider))
    copy = client.with_options(max_retries=0)
    assert (await call(client.complete(MODELS[provider], "Alice"))).text
    await call(client.close())
    before = sandbox.stats().requests
    for closed in (client, copy):  # a copy shares the pool its parent closed
        for attempt in (
            lambda c=closed: call(c.complete(MODELS[provider], "Alice")),
            lambda c=closed: collect(c.stream(MODELS[provider], "Alice")),
            lambda c=closed: collect(c.complete_many(MODELS[provider], ["Alice"])),
        ):
            with pytest.raises(RuntimeError, match="client is closed"):
                await attempt()
    await call(client.close())  # closing again is harmless
    assert sandbox.stats().requests == before


async def leave(client: Any, asynchronous: bool) -> None:
    """Use ``client`` in a ``with`` (``async with``) block, as its only user would, and leave it."""
    model = MODELS[client.API.name]
    if asynchronous:
        async with client as inside:
            assert (await inside.complete(model, "Alice")).text
    else:
        with client as inside:
            assert inside.complete(model, "Alice").text


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_leaving_a_derived_clients_block_closes_it_alone(
    make_client: Any, sandbox: Sandbox, provider: str, lane: str
) -> None:
    """A ``with_options`` copy shares its parent's pool and never closes it: closing the copy (or leaving
    its block) marks only the copy closed; the parent, and its other copies, go on until it is closed."""
    parent = make_client(provider, lane, base_url=base_url(sandbox, provider))
    sibling = parent.with_options(max_retries=0)
    derived = parent.with_options(timeout=30)
    await leave(derived, lane != "sync")
    assert (await call(parent.complete(MODELS[provider], "Alice"))).text
    assert (await call(sibling.complete(MODELS[provider], "Alice"))).text
    assert await collect(parent.stream(MODELS[provider], "Alice"))
    with pytest.raises(ClientClosedError, match=f"this {type(parent).__name__} client is closed"):
        await call(derived.complete(MODELS[provider], "Alice"))
    with pytest.raises(ClientClosedError):
        derived.with_options(max_retries=1).stream(MODELS[provider], "Alice")  # a copy of a closed one
    await call(parent.close())
    with pytest.raises(ClientClosedError):
        await call(sibling.complete(MODELS[provider], "Alice"))


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_derived_client_never_closes_the_users_http_client(
    sandbox: Sandbox, asynchronous: bool
) -> None:
    http = httpx.AsyncClient() if asynchronous else httpx.Client()
    parent = CLASSES["scale"][asynchronous](
        **CREDENTIALS["scale"], base_url=sandbox.scale_base_url, http_client=http
    )
    await leave(parent.with_options(timeout=30), asynchronous)
    await call(parent.with_options(max_retries=0).close())
    assert not http.is_closed
    assert (await call(parent.complete(MODELS["scale"], "Alice"))).text
    await call(parent.close())  # the client closes the pool it was given, as documented
    assert http.is_closed


@pytest.mark.usefixtures("clean_env")
def test_a_copy_of_the_module_level_client_leaves_it_open(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wrapper.scale

    monkeypatch.setenv("SGP_API_KEY", "key-for-the-sandbox")
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", sandbox.scale_base_url)
    try:
        assert wrapper.scale.complete(MODELS["scale"], "Alice").text
        with wrapper.scale._default.get().with_options(timeout=30) as quick:  # no public name reaches it
            assert quick.complete(MODELS["scale"], "Alice").text
        assert wrapper.scale.complete(MODELS["scale"], "Alice").text
        assert "".join(chunk.text for chunk in wrapper.scale.stream(MODELS["scale"], "Alice"))
    finally:
        wrapper.scale._default.close()
    assert sandbox.stats().requests == 4


CROSS_LOOPS = """
import asyncio, gc, sys, threading
from wrapper.{module} import {cls}

client = {cls}({credentials}, base_url=sys.argv[1])

async def use():
    result = await client.complete("{model}", "Alice")
    chunks = [chunk.text async for chunk in client.stream("{model}", "Alice")]
    batch = [r.ok async for r in client.complete_many("{model}", ["a", "b", "c"])]
    return bool(result.text) and bool("".join(chunks)) and batch == [True] * 3

results = [asyncio.run(use()), asyncio.run(use())]  # two loops in a row
threads = [threading.Thread(target=lambda: results.append(asyncio.run(use()))) for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()

async def close():
    await client.close()

asyncio.run(close())
del client
gc.collect()
print(results)
"""


@pytest.mark.parametrize("provider", ["scale", "gradient"])
def test_one_async_client_in_many_loops_and_threads_leaks_nothing(sandbox: Sandbox, provider: str) -> None:
    cls = CLASSES[provider][1]
    credentials = ", ".join(f"{key}={value!r}" for key, value in CREDENTIALS[provider].items())
    script = CROSS_LOOPS.format(
        module=provider, cls=cls.__name__, credentials=credentials, model=MODELS[provider]
    )
    out = subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error",
            "-c",
            textwrap.dedent(script),
            base_url(sandbox, provider),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([True] * 5)
    assert "Unclosed" not in out.stderr, out.stderr
    assert "ResourceWarning" not in out.stderr, out.stderr


DROPPED = """
import asyncio, gc, os, sys
from pathlib import Path
from wrapper.scale import AsyncScale, Scale

url, port = sys.argv[1], int(sys.argv[1].rsplit(":", 1)[1])


def connected():
    \"\"\"This machine's sockets to the server that are still open on the client's side.\"\"\"
    table = Path("/proc/net/tcp")
    if not table.exists():
        return 0
    rows = [line.split() for line in table.read_text().splitlines()[1:]]
    return sum(int(row[2].rsplit(":", 1)[1], 16) == port and row[3] in ("01", "08") for row in rows)


async def drop_async_clients():
    for _ in range(30):
        client = AsyncScale(api_key="k", base_url=url)
        assert (await client.complete("llama-3-8b-instruct", "Alice", max_tokens=2)).text
        del client  # never closed
        gc.collect()
    await asyncio.sleep(0.5)  # the loop closes what the collected clients left
    gc.collect()
    return connected()


async_left = asyncio.run(drop_async_clients())
for _ in range(5):
    client = Scale(api_key="k", base_url=url)
    assert client.complete("llama-3-8b-instruct", "Alice", max_tokens=2).text
    del client
    gc.collect()
print(async_left, connected())
"""


@pytest.mark.parametrize("pool", ["own", "httpx"])
def test_clients_dropped_unclosed_release_their_pools_quietly(sandbox: Sandbox, pool: str) -> None:
    """30 async clients collected on a live loop (aiohttp reported "Unclosed client session" and
    "Unclosed connector", 64 reports) and 5 sync ones (a ``ResourceWarning`` per socket): each client's
    pools are closed when it is collected, with nothing reported; ``pool="httpx"``: httpx's own pools,
    which a client uses when a proxy is configured (here one that loopback bypasses)."""
    env = {name: value for name, value in os.environ.items() if "proxy" not in name.lower()}
    if pool == "httpx":
        env.update(HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1")
    out = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", textwrap.dedent(DROPPED), sandbox.scale_base_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "nclosed" not in out.stderr, out.stderr
    assert "ResourceWarning" not in out.stderr, out.stderr
    assert out.stdout.split() == ["0", "0"]  # no connection left open, async or sync


def recorder(log: list[str]) -> type[CallHooks]:
    """Hooks that note each call the attempt loop makes of them, in ``log``."""

    class Recording(CallHooks):
        def before(self) -> None:
            log.append("before")

        def succeeded(self, completion: Completion | None) -> None:
            log.append(f"succeeded {type(completion).__name__}")

        def failed(self, error: APIError) -> bool:
            log.append(f"failed {type(error).__name__}")
            return False

        def retrying(self, error: APIError, retry: int, delay: float) -> None:
            log.append(f"retrying {retry}")

        def finished(self, error: BaseException | None) -> None:
            log.append(f"finished {type(error).__name__ if error else None}")

    return Recording


async def test_the_attempt_loops_call_the_hooks_around_each_attempt(sandbox: Sandbox) -> None:
    """The hooks a batch paces and counts with: the same order, sync and async, and the budget honoured."""
    sandbox.inject(status=503, count=1, api="scale")
    synced: list[str] = []
    scale = CLASSES["scale"][0](**CREDENTIALS["scale"], base_url=sandbox.scale_base_url, max_retries=1)
    with scale:
        assert scale.complete(MODELS["scale"], "Alice", hooks=[recorder(synced)]).text
    sandbox.inject(status=503, count=2, api="scale")
    failing: list[str] = []
    options = {"base_url": sandbox.scale_base_url, "max_retries": 1, "hooks": [recorder(failing)]}
    async with CLASSES["scale"][1](**CREDENTIALS["scale"], **options) as ascale:
        with pytest.raises(InternalServerError):
            await ascale.complete(MODELS["scale"], "Alice")
    assert synced == [
        "before",
        "failed InternalServerError",
        "retrying 1",
        "before",
        "succeeded Completion",
        "finished None",
    ]
    assert failing == [
        "before",
        "failed InternalServerError",
        "retrying 1",
        "before",
        "failed InternalServerError",
        "finished InternalServerError",
    ]
