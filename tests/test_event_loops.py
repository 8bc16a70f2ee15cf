"""An async client and the event loops it runs in: the first call does not block its loop with imports,
and a loop closed by hand leaks nothing when the client (or the loop's generators) is closed first.

Each check runs in a fresh interpreter, whose modules are those a user's program has: what a first
call imports there is what it would import inside the user's loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from helpers import ENV_VARS, LocalServer, echo_reply

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


def run(script: str, server: LocalServer, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter (warnings as errors, asyncio's debug mode), its Scale client on
    ``server``, no proxy unless ``env`` sets one."""
    clean = {
        name: value
        for name, value in os.environ.items()
        if name not in ENV_VARS and name.upper() not in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
    }
    clean.update(SGP_API_KEY="sk-test-key", SGP_ACCOUNT_ID="acct", SGP_CLIENT_BASE_URL=server.url, **env)
    return subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", textwrap.dedent(script), *args],
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
