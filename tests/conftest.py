"""Shared fixtures: environment, client factories, a scripted HTTP server, clients with the suite's timeout.

Helpers that are not fixtures live in ``tests/helpers.py``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import (
    CLASSES,
    CREDENTIALS,
    ENV_VARS,
    LIBRARY_ENV,
    ROOT,
    TEST_TIMEOUT,
    Handler,
    LocalServer,
    call,
    http_library,
    mock_transport,
    retry_waits,
)
from redis_server import redis_server, redis_url  # noqa: F401  (fixtures: a real redis-server)

from wrapper._core import options

collect_ignore = ["httpx2_mocks"]
"""Tests of users' httpx2 mocks: each needs a plugin the suite's environment lacks (both install the module
``pytest_httpx2``); ``nox -s httpx2_mocks`` runs them, one environment a plugin."""


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


@pytest.fixture(params=["httpx", "httpx2"])
def library(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Run the test on each HTTP library, httpx and httpx2: the clients' own pools speak it
    (``COMPLETION_CLIENTS_HTTP``), and ``make_client`` gives its clients one of its ``Client``s. A test
    module runs whole on both with ``pytestmark = pytest.mark.usefixtures("library")``."""
    monkeypatch.setenv(LIBRARY_ENV, request.param)
    return importlib.import_module(request.param)


@pytest.fixture
async def make_client(sleeps: list[float], clean_env: None) -> AsyncIterator[Callable[..., Any]]:
    """``make_client(provider, mode, handler=..., **options)``: a client on a MockTransport (or, with
    ``base_url`` and no handler, on its default transport), closed after the test. ``mode`` is
    ``"sync"``, ``"async"``, or a ``lane``: ``"aiohttp"`` (async, its default transport) or ``"httpx"``
    (async on an ``httpx.AsyncClient`` of its own). Under the ``library`` fixture's httpx2, the
    MockTransport and the ``AsyncClient`` are httpx2's (``helpers.mock_transport``)."""
    opened: list[Any] = []

    def make(provider: str, mode: str, handler: Handler | None = None, **options: Any) -> Any:
        cls = CLASSES[provider][mode != "sync"]
        http = http_library()
        if mode == "httpx" and handler is None:
            options.setdefault("http_client", http.AsyncClient())
        if handler is not None:
            transport = mock_transport(http, handler)
            given = (
                http.Client(transport=transport) if mode == "sync" else http.AsyncClient(transport=transport)
            )
            options.setdefault("http_client", given)
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
def mypy_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One mypy cache for the tests that type-check copies and installs, shared by the run's xdist
    workers, and started from the checkout's (where ``make lint``'s mypy, beside them in ``make test``,
    has usually analysed the standard library and the dependencies by then): that analysis is done
    once, not once a process. mypy replaces each cache file whole, so processes can share it, and
    checks each entry against its source, so a copy's modules are analysed again where they differ."""
    run = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run = run.parent  # the run's directory, above each worker's own
    cache = run / "mypy-cache"
    try:
        cache.mkdir()
    except FileExistsError:
        return cache  # another worker made it
    # None yet, or files mypy replaced meanwhile (the rest is copied): a colder start, as good.
    with contextlib.suppress(shutil.Error, OSError):
        shutil.copytree(ROOT / ".mypy_cache", cache, dirs_exist_ok=True)
    return cache


@pytest.fixture(autouse=True)
def _short_client_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client built in a test defaults to ``TEST_TIMEOUT`` instead of the 600 s read timeout."""
    monkeypatch.setattr(options, "DEFAULT_TIMEOUT", TEST_TIMEOUT)


# --- one client per path: sync, async on its own pools (aiohttp), async on a user's httpx.AsyncClient ---

PATHS = ["sync", "async", "async-user"]
NETWORK_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Sync client; async client on its own pools; async client on a user's ``httpx.AsyncClient``."""
    return str(request.param)


@pytest.fixture
def net_env(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> pytest.MonkeyPatch:
    """No proxy or CA setting from the machine running the tests; set them with the returned monkeypatch."""
    for name in NETWORK_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


@pytest.fixture
async def net_client(net_env: pytest.MonkeyPatch) -> AsyncIterator[Callable[..., Any]]:
    """``net_client(provider, path, base_url, **options)``: a client built now (from the environment as it
    is now), without retries and with a 10 s timeout unless given; closed after the test.

    On the ``async-user`` path the user's ``httpx.AsyncClient(**user_options)`` (httpx2's under the
    ``library`` fixture's httpx2) is built now too, so it reads the same environment (httpx's ``trust_env``).
    """
    opened: list[Any] = []

    def make(
        provider: str, path: str, base_url: str, user_options: dict[str, Any] | None = None, **options: Any
    ) -> Any:
        if path == "async-user":
            options["http_client"] = http_library().AsyncClient(**(user_options or {}))
        options.setdefault("timeout", 10.0)
        options.setdefault("max_retries", 0)
        client = CLASSES[provider][path != "sync"](**CREDENTIALS[provider], base_url=base_url, **options)
        opened.append(client)
        return client

    yield make
    for client in opened:
        await call(client.close())


SERIAL_MARK = "mark.serial"
"""What the source of every module holding ``serial`` tests says (``@pytest.mark.serial``, ``pytestmark``)."""


def _selects_only_serial(config: pytest.Config) -> bool:
    """``-m`` and's ``serial`` with other terms, if any (``serial and not dist``): no other test can match."""
    expression = config.option.markexpr
    terms = [term.strip() for term in expression.split(" and ")]
    return "serial" in terms and "(" not in expression and " or " not in expression


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m serial...`` (the serial part), a test module that never says ``mark.serial`` is not even
    imported: collecting the whole suite cost each of the part's processes about 8 s of CPU, collecting
    the modules with serial tests about 4 (``pytest_collection_modifyitems`` refuses a serial test in a
    module that does not say it, so none is left out)."""
    if (
        collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
        and _selects_only_serial(config)
    ):
        return SERIAL_MARK not in collection_path.read_text(encoding="utf-8") or None
    return None


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects anything
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``serial`` test must be in a module whose source says ``mark.serial`` (``pytest_ignore_collect``).

    Under xdist, the modules marked ``long`` for the part running (``_long``) come first, in their order,
    the others after in theirs: xdist hands out whole modules in this order (``--no-loadscope-reorder``,
    ``pyproject.toml``), and a long module handed out last ends the part alone (xdist's own order, most
    tests first, gave the four tests of ``test_spec_releases.py`` and the one of ``test_bench_smoke.py``
    out last: 100 s alone)."""
    unsaid = {
        item.nodeid.split("::")[0] for item in items
        if item.get_closest_marker("serial") and SERIAL_MARK not in item.path.read_text(encoding="utf-8")
    }  # fmt: skip
    if unsaid:
        raise pytest.UsageError(f"serial tests in modules that never say {SERIAL_MARK}: {sorted(unsaid)}")
    if hasattr(config, "workerinput"):
        part = "serial" if _selects_only_serial(config) else "parallel"
        items.sort(key=lambda item: not _long(item, part))  # stable: a module stays whole


PARTS = ("parallel", "serial")


def _long(item: pytest.Item, part: str) -> bool:
    """Whether ``item``'s module is marked ``long`` for ``part``: ``pytest.mark.long("serial")`` names the
    parts where the module keeps a process busy for a minute or so. Long in one part, a module can be
    short in the other (``test_client_edges.py``: 45 s of tests in the parallel part, 6 s of serial ones),
    and a short module handed out first delays a long one (the serial part took 160 s rather than 130
    when ``test_ray.py``, 74 s, went out fourth, behind two modules long only in the parallel part)."""
    mark = item.get_closest_marker("long")
    if mark is None:
        return False
    if not mark.args or not set(mark.args) <= set(PARTS):
        raise pytest.UsageError(f"{item.nodeid}: pytest.mark.long names the parts it is long in, of {PARTS}")
    return part in mark.args


ONLY_SERIAL = pytest.StashKey[bool]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Outside the serial part, what collection loaded (the suite's modules and every library they import,
    half a million objects) is put out of the garbage collector's sight once its garbage is collected: a
    full collection walked it all again each time, 0.25 s of CPU (a test that collects the garbage before
    it runs, ``test_client_edges.py``'s ``collected_first``, and each collection Python starts itself).
    What tests create is collected as before. The serial part is left as its timings were measured."""
    session.config.stash[ONLY_SERIAL] = all(item.get_closest_marker("serial") for item in session.items)
    if not _selects_only_serial(session.config):
        gc.collect()
        gc.freeze()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``serial`` test (timing, rates, in-flight peaks) fails rather than run under xdist beside tests
    that are not: only the serial part (``-m serial``) may run its tests on more than one process."""
    workers = getattr(item.config, "workerinput", {}).get("workercount", 1)  # set on xdist's workers only
    if item.get_closest_marker("serial") and workers > 1 and not item.config.stash.get(ONLY_SERIAL, False):
        pytest.fail(
            f"{item.nodeid} is marked serial: run it with the serial tests alone (`make test-serial`, or "
            "pytest -m serial), as `make test` does",
            pytrace=False,
        )
