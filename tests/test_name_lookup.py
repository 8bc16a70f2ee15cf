"""A slow name lookup is bounded by the connect timeout and by the deadline, on every path.

The system's resolver is replaced by one that answers for ``slow-lookup.test`` only after a delay
(or never, until the test ends), and sends everything else to the real one. Before, the sync client
waited for the lookup as long as it took (``socket.create_connection`` has no bound on it) and
aiohttp bounded it only by its whole connection's timeout.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from helpers import LocalServer, call, collect

from wrapper.errors import APITimeoutError

pytestmark = [
    pytest.mark.serial,  # bounds on wall-clock time
    pytest.mark.usefixtures("library"),  # on httpx and on httpx2
    # The slow names resolve to a loopback server over plain http://, which the clients warn about for a
    # name that is not loopback itself (tests/test_client_config.py checks that warning).
    pytest.mark.filterwarnings("ignore::wrapper.errors.InsecureConnectionWarning"),
]

HOST = "slow-lookup.test"


class SlowResolver:
    """``socket.getaddrinfo`` that answers for ``HOST`` (with the loopback address) after ``delay``
    seconds, or, with ``delay`` None, once ``release()`` is called."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.delay: float | None = None
        self.asked = 0
        self._released = threading.Event()

    def release(self) -> None:
        self._released.set()

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (HOST, HOST.encode()):  # anyio (httpx's async pool) asks with bytes
            return self.original(host, port, *args, **kwargs)
        self.asked += 1
        self._released.wait(10 if self.delay is None else self.delay)
        return self.original("127.0.0.1", port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowResolver]:
    slow = SlowResolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", slow)
    try:
        yield slow
    finally:
        slow.release()  # the lookups still waiting end now: their threads (and the loop's executor) finish


def url(server: LocalServer) -> str:
    return f"http://{HOST}:{server.url.rpartition(':')[2]}"


@pytest.mark.parametrize("kind", ["complete", "stream"])
async def test_the_connect_timeout_bounds_a_lookup(
    net_client: Any, server: LocalServer, resolver: SlowResolver, path: str, kind: str
) -> None:
    client = net_client("scale", path, url(server), timeout=httpx.Timeout(10.0, connect=0.3))
    started = time.monotonic()
    with pytest.raises(APITimeoutError) as caught:
        await (call(client.complete("m", "p")) if kind == "complete" else collect(client.stream("m", "p")))
    assert time.monotonic() - started < 0.3 + 1.0
    assert str(caught.value) == (
        f"connect timeout: no connection to {url(server).removeprefix('http://')} within 0.3 s; "
        "check base_url and the network, or raise the connect timeout (after 1 attempt)"
    )
    assert resolver.asked >= 1
    assert server.requests == []


@pytest.mark.usefixtures("sleeps")
async def test_the_deadline_bounds_a_lookup(
    net_client: Any, server: LocalServer, resolver: SlowResolver, path: str
) -> None:
    client = net_client("scale", path, url(server), timeout=10.0, deadline=0.5, max_retries=2)
    started = time.monotonic()
    with pytest.raises(
        APITimeoutError,
        match=r"^the call's deadline of 0.5 s ran out after 1 attempt \([0-9.]+ s elapsed\); ",
    ):
        await call(client.complete("m", "p"))
    assert time.monotonic() - started < 0.5 + 1.0


async def test_a_lookup_within_the_timeout_connects_to_what_it_found(
    net_client: Any, server: LocalServer, resolver: SlowResolver, path: str
) -> None:
    resolver.delay = 0.2
    client = net_client("scale", path, url(server), timeout=httpx.Timeout(10.0, connect=3.0))
    assert (await call(client.complete("m", "p"))).text == "Paris"
    assert resolver.asked == 1
    assert server.requests[0][2]["host"] == url(server).removeprefix("http://")
