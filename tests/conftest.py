"""Shared fixtures: environment, client factories, a scripted HTTP server, clients with the suite's timeout.

Helpers that are not fixtures live in ``tests/helpers.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import CLASSES, CREDENTIALS, ENV_VARS, TEST_TIMEOUT, Handler, LocalServer, call, retry_waits


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


@pytest.fixture
async def make_client(sleeps: list[float], clean_env: None) -> AsyncIterator[Callable[..., Any]]:
    """``make_client(provider, mode, handler=..., **options)``: a client on a MockTransport (or, with
    ``base_url`` and no handler, on its default transport), closed after the test."""
    opened: list[Any] = []

    def make(provider: str, mode: str, handler: Handler | None = None, **options: Any) -> Any:
        cls = CLASSES[provider][mode == "async"]
        if handler is not None:
            transport = httpx.MockTransport(handler)
            http = (
                httpx.AsyncClient(transport=transport)
                if mode == "async"
                else httpx.Client(transport=transport)
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


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the tests that type-check (per xdist worker): the standard library and the
    dependencies are analysed once, not once a test; mypy's incremental checks keep each result exact."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.fixture(autouse=True)
def _short_client_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client built in a test defaults to ``TEST_TIMEOUT`` instead of the 600 s read timeout."""
    for cls in (*CLASSES["scale"], *CLASSES["gradient"]):
        monkeypatch.setitem(cls.__init__.__kwdefaults__, "timeout", TEST_TIMEOUT)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``serial`` test (timing, rates, in-flight peaks) fails rather than run beside others under xdist."""
    workers = getattr(item.config, "workerinput", {}).get("workercount", 1)  # set on xdist's workers only
    if item.get_closest_marker("serial") and workers > 1:
        pytest.fail(
            f"{item.nodeid} is marked serial: run it with nothing beside it (`make test-serial`, or pytest "
            "without -n), as `make test` does",
            pytrace=False,
        )
