"""Shared fixtures: environment, client factories, a scripted HTTP server, clients with the suite's timeout.

Helpers that are not fixtures live in ``tests/helpers.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from helpers import (
    CLASSES,
    CREDENTIALS,
    ENV_VARS,
    TEST_TIMEOUT,
    Handler,
    LocalServer,
    call,
    retry_waits,
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider settings from the machine running the tests."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sleeps() -> Iterator[list[float]]:
    """The waits the clients' retries ask for (sync and async): logged, not slept (``wrapper.testing``)."""
    with retry_waits() as waits:
        yield waits


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Run the test with the sync and with the async client."""
    return str(request.param)


@pytest.fixture(params=["sync", "aiohttp", "httpx"])
def lane(request: pytest.FixtureRequest) -> str:
    """Run the test with the sync client, and with the async client on each transport: aiohttp (its
    default) and httpx (``http_client=``). ``make_client`` takes it as its ``mode``."""
    return str(request.param)


@pytest.fixture
async def make_client(sleeps: list[float], clean_env: None) -> AsyncIterator[Callable[..., Any]]:
    """``make_client(provider, mode, handler=..., **options)``: a client on a MockTransport (or, with
    ``base_url`` and no handler, on its default transport), closed after the test. ``mode`` is
    ``"sync"``, ``"async"``, or a ``lane``: ``"aiohttp"`` (async, its default transport) or ``"httpx"``
    (async on an ``httpx.AsyncClient`` of its own)."""
    opened: list[Any] = []

    def make(provider: str, mode: str, handler: Handler | None = None, **options: Any) -> Any:
        cls = CLASSES[provider][mode != "sync"]
        if mode == "httpx" and handler is None:
            options.setdefault("http_client", httpx.AsyncClient())
        if handler is not None:
            transport = httpx.MockTransport(handler)
            http = (
                httpx.Client(transport=transport)
                if mode == "sync"
                else httpx.AsyncClient(transport=transport)
            )
            options.setdefault("http_client", http)
            options.setdefault("base_url", "https://api.test/api")
        client = cls(**{**CREDENTIALS[provider], **options})
        opened.append(client)
        return client

    yield make
    for client in opened:
        await call(client.close())


@pytest.fixture
def server() -> Iterator[LocalServer]:
    """A ``LocalServer``, stopped after the test."""
    local = LocalServer()
    local.start()
    yield local
    local.stop()


@pytest.fixture(autouse=True)
def _short_client_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client built in a test defaults to ``TEST_TIMEOUT`` instead of the 600 s read timeout."""
    for cls in (*CLASSES["scale"], *CLASSES["gradient"]):
        monkeypatch.setitem(cls.__init__.__kwdefaults__, "timeout", TEST_TIMEOUT)
