"""pytest fixtures backed by the sandbox, registered as a ``pytest11`` plugin with the ``sandbox`` extra.

- ``sandbox_session``: one running :class:`~wrapper.sandbox.Sandbox` (seed 0) for the whole session,
  recording its exchanges and logging each request (pytest shows the lines of a failing test);
- ``sandbox``: that sandbox, reset for each test (no fault queued, stats and exchanges from zero, full
  rate budgets, sampling reseeded), so a test sees the same answers and counts whatever ran before it
  (a request an earlier test left behind counts in none of them); faults it injects are cleared when it
  ends;
- ``sandbox_env``: ``sandbox``, with the environment variables of both APIs (``SGP_API_KEY``,
  ``SGP_CLIENT_BASE_URL``, ``GRADIENT_ACCESS_TOKEN``, ...) pointing at it for the test, so that clients
  your code builds from the environment (``Scale()``, ``AsyncGradient()``) use it;
- ``scale_client``, ``gradient_client``: :class:`~wrapper.scale.Scale` / :class:`~wrapper.gradient.Gradient`
  on ``sandbox`` (10 s timeout, default retries), closed after the test;
- ``async_scale_client``, ``async_gradient_client``: the async clients, the same way (need pytest-asyncio).

Nothing heavy is imported until a fixture runs: without starlette and uvicorn, a session that uses none
of these fixtures is unaffected, and one that does gets an error naming the extra to install.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

try:  # the async fixtures need it; without it they say so
    import pytest_asyncio
except ImportError:  # pragma: no cover - it is part of the dev extra
    pytest_asyncio = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from wrapper.apis import Api
    from wrapper.gradient import AsyncGradient, Gradient
    from wrapper.sandbox import Sandbox
    from wrapper.scale import AsyncScale, Scale

__all__ = [
    "async_gradient_client",
    "async_scale_client",
    "gradient_client",
    "sandbox",
    "sandbox_env",
    "sandbox_session",
    "scale_client",
]

TIMEOUT = 10.0
"""Seconds the fixtures' clients wait for an answer: a test that hangs fails soon."""
CREDENTIAL = "sandbox-credential"
"""The fixtures' clients' credentials (the sandbox takes any; each rate limit applies per credential)."""


def _sandbox_class() -> type[Sandbox]:
    try:
        from wrapper.sandbox import Sandbox
    except ImportError as exc:
        from wrapper.extras import install_hint

        pytest.fail(
            f"the sandbox fixtures need the sandbox extra ({exc.name or exc} is missing): "
            + install_hint("sandbox"),
            pytrace=False,
        )
    return Sandbox


@pytest.fixture(scope="session")
def sandbox_session() -> Iterator[Sandbox]:
    """A sandbox serving both APIs on a free port for the whole session (seed 0), recording its exchanges
    and logging each request."""
    with _sandbox_class()(seed=0, record=True, log=True) as sb:
        yield sb


@pytest.fixture
def sandbox(sandbox_session: Sandbox) -> Iterator[Sandbox]:
    """The session's sandbox, reset for this test: no fault, fresh stats and exchanges, sampling reseeded."""
    sandbox_session.reset()
    yield sandbox_session
    sandbox_session.clear_faults()


@pytest.fixture
def sandbox_env(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    """``sandbox``, with each API's environment variables (base URL and credentials) pointing at it for
    this test: clients built from the environment use it."""
    for name, value in sandbox.environ(CREDENTIAL).items():
        monkeypatch.setenv(name, value)
    return sandbox


def _client(sandbox: Sandbox, api: Api, asynchronous: bool) -> Any:
    """The API's sync or async client on ``sandbox``: every credential ``CREDENTIAL``, a short timeout."""
    credentials = {credential.keyword: CREDENTIAL for credential in api.credentials}
    url = sandbox.url + api.sandbox_path
    return api.clients()[1 if asynchronous else 0](**credentials, base_url=url, timeout=TIMEOUT)


@pytest.fixture
def scale_client(sandbox: Sandbox) -> Iterator[Scale]:
    """A ``Scale`` client on ``sandbox``, closed after the test."""
    from wrapper.scale import API

    with _client(sandbox, API, asynchronous=False) as client:
        yield client


@pytest.fixture
def gradient_client(sandbox: Sandbox) -> Iterator[Gradient]:
    """A ``Gradient`` client on ``sandbox``, closed after the test."""
    from wrapper.gradient import API

    with _client(sandbox, API, asynchronous=False) as client:
        yield client


if pytest_asyncio is not None:

    @pytest_asyncio.fixture
    async def async_scale_client(sandbox: Sandbox) -> AsyncIterator[AsyncScale]:
        """An ``AsyncScale`` client on ``sandbox``, closed after the test."""
        from wrapper.scale import API

        async with _client(sandbox, API, asynchronous=True) as client:
            yield client

    @pytest_asyncio.fixture
    async def async_gradient_client(sandbox: Sandbox) -> AsyncIterator[AsyncGradient]:
        """An ``AsyncGradient`` client on ``sandbox``, closed after the test."""
        from wrapper.gradient import API

        async with _client(sandbox, API, asynchronous=True) as client:
            yield client

else:

    @pytest.fixture
    def async_scale_client(sandbox: Sandbox) -> AsyncIterator[AsyncScale]:
        """Needs pytest-asyncio."""
        pytest.fail("async_scale_client needs pytest-asyncio: pip install pytest-asyncio", pytrace=False)

    @pytest.fixture
    def async_gradient_client(sandbox: Sandbox) -> AsyncIterator[AsyncGradient]:
        """Needs pytest-asyncio."""
        pytest.fail("async_gradient_client needs pytest-asyncio: pip install pytest-asyncio", pytrace=False)
