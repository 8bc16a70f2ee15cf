"""An async client and the event loops it runs in: building the first client inside a loop and its first
call do not block the loop (with imports, a CA bundle, package metadata), and a loop closed by hand leaks
nothing when the client (or the loop's generators) is closed first.

Each check runs in a fresh interpreter, whose modules are those a user's program has: what a first
call imports there is what it would import inside the user's loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import ENV_VARS, LocalServer, echo_reply

from wrapper.sandbox import Sandbox

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

FIRST_CALL = """
import asyncio, importlib, os, sys
from wrapper.scale import AsyncScale

http = importlib.import_module(os.environ.get("COMPLETION_CLIENTS_HTTP") or "httpx")  # httpx, or httpx2
client = AsyncScale(http_client=http.AsyncClient()) if sys.argv[1] == "async-user" else AsyncScale()
built = set(sys.modules)

async def first_calls():
    await client.complete("m", "Alice")
    assert "".join([chunk.text async for chunk in client.stream("m", "Bob")]) == "Bob"
    await client.close()

asyncio.run(first_calls())
print(*sorted(name for name in set(sys.modules) - built if not name.startswith("wrapper.")), sep="\\n")
"""


def run(
    script: str, server: LocalServer | Sandbox, *args: str, dev: bool = True, **env: str
) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter (warnings as errors; asyncio's debug mode unless ``dev=False``),
    its clients on ``server`` (a sandbox: Gradient's too), no proxy unless ``env`` sets one."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if name not in ENV_VARS and name.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    }
    if isinstance(server, Sandbox):
        clean.update(
            SGP_CLIENT_BASE_URL=server.scale_base_url,
            GRADIENT_API_URL=server.gradient_base_url,
            GRADIENT_ACCESS_TOKEN="token",
            GRADIENT_WORKSPACE_ID="workspace",
        )
    else:
        clean.update(SGP_CLIENT_BASE_URL=server.url)
    clean.update(SGP_API_KEY="sk-test-key", SGP_ACCOUNT_ID="acct", **env)
    dev_mode = ["-X", "dev"] if dev else []
    return subprocess.run(
        [sys.executable, *dev_mode, "-W", "error", "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean,
    )


@pytest.mark.parametrize("path", ["async", "async-proxy", "async-user"])
def test_the_first_call_imports_nothing_inside_the_event_loop(server: LocalServer, path: str) -> None:
    """Building the client imports what its transports need (aiohttp; httpx's anyio backend), so its
    first call does not (imports of some 80 modules blocked the loop for 0.2 to 0.5 s)."""
    server.script(echo_reply)
    # A proxy in the environment makes the client's own pool httpx's; NO_PROXY sends loopback direct.
    proxy = {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"} if path == "async-proxy" else {}
    out = run(FIRST_CALL, server, path.removesuffix("-proxy"), **proxy)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], "imported by the first call, inside the loop"
    assert len(server.requests) == 2


IN_A_LOOP = """
import asyncio, asyncio.events, json, sys, time
import httpx
import wrapper.gradient, wrapper.scale  # importing may take its time; nothing after it may block the loop

steps = []  # the thread CPU time of each step the loop runs: what each one kept the loop from doing


def timed(handle, run=asyncio.events.Handle._run):
    started = time.thread_time()
    run(handle)
    steps.append(time.thread_time() - started)


asyncio.events.Handle._run = timed  # every callback and task step of the loop runs through it


def built(cls, **options):
    started = time.thread_time()
    client = cls(**options)
    return client, time.thread_time() - started


async def main():
    user = {"http_client": httpx.AsyncClient()} if sys.argv[1] == "async-user" else {}
    scale, scale_built = built(wrapper.scale.AsyncScale, **user)
    gradient, gradient_built = built(wrapper.gradient.AsyncGradient)
    await asyncio.sleep(0)  # this step, the builds', ends here
    steps.clear()
    assert (await scale.complete("llama-3-8b-instruct", "Alice", max_tokens=4)).text
    assert [chunk async for chunk in scale.stream("llama-3-8b-instruct", "Alice", max_tokens=4)]
    assert (await gradient.complete("nous-hermes2", "Alice", max_generated_token_count=4)).text
    first_calls = max(steps)
    await scale.close()
    await gradient.close()
    print(json.dumps({"scale": scale_built, "gradient": gradient_built, "first calls": first_calls}))


asyncio.run(main())
"""


@pytest.fixture(scope="module", params=["async", "async-proxy", "async-user"])
def in_a_loop(request: pytest.FixtureRequest, sandbox_session: Sandbox) -> dict[str, float]:
    """``IN_A_LOOP``'s figures, on each path: the client's own pools (aiohttp), httpx's because of a
    proxy in the environment, a user's ``httpx.AsyncClient``. Each step is timed in the thread's CPU
    time, which a busy machine's other processes do not lengthen, and which the loads were."""
    path = str(request.param)
    proxy = {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"} if path == "async-proxy" else {}
    out = run(IN_A_LOOP, sandbox_session, path.removesuffix("-proxy"), dev=False, **proxy)
    assert out.returncode == 0, out.stderr
    took: dict[str, float] = json.loads(out.stdout)
    return took


@pytest.mark.serial
def test_the_first_clients_built_inside_a_running_loop_take_under_20_ms(in_a_loop: dict[str, float]) -> None:
    """After ``import wrapper.scale`` (and ``wrapper.gradient``), building the first clients inside a
    running loop, as a web app's lifespan does, loads nothing: the first ``AsyncScale`` took 0.18 to
    0.3 s when it imported aiohttp and loaded the CA bundle and the package's metadata."""
    assert in_a_loop["scale"] < 0.020, in_a_loop
    assert in_a_loop["gradient"] < 0.020, in_a_loop


@pytest.mark.serial
def test_no_step_of_the_first_calls_holds_the_loop_for_50_ms(in_a_loop: dict[str, float]) -> None:
    """The first ``complete``, ``stream`` and Gradient ``complete`` of clients built inside the loop, to
    the sandbox: no step the loop runs for them takes 50 ms."""
    assert in_a_loop["first calls"] < 0.050, in_a_loop


CLOSED_BY_HAND = """
import asyncio, gc, sys
from wrapper.scale import AsyncScale

client = AsyncScale()
loop = asyncio.new_event_loop()
assert loop.run_until_complete(client.complete("m", "Alice")).text == "Alice"
if sys.argv[1] == "close the client":
    loop.run_until_complete(client.close())
else:
    loop.run_until_complete(loop.shutdown_asyncgens())  # closes the loop's pools (what asyncio.run does)
loop.close()
del client, loop
gc.collect()
"""


@pytest.mark.parametrize("first", ["close the client", "shut down the loop's generators"])
def test_a_loop_closed_by_hand_leaks_nothing_when_closed_as_documented(
    server: LocalServer, first: str
) -> None:
    """``loop.close()`` alone cannot close a pool (nothing runs in a closed loop): docs/networks.md
    says to close the client, or the loop's async generators, first; either way nothing is left open."""
    server.script(echo_reply)
    out = run(CLOSED_BY_HAND, server, first)
    assert out.returncode == 0, out.stderr
    assert "Unclosed" not in out.stderr, out.stderr
    assert "ResourceWarning" not in out.stderr, out.stderr
