"""``DefaultHttpxClient``, ``DefaultAsyncHttpxClient`` as ``http_client=``: our pool, with changes; and
``DefaultHttpx2Client``, ``DefaultAsyncHttpx2Client``, the same on httpx2 (the ``library`` fixture)."""
# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from helpers import LocalServer, call, collect, http_library
from sandbox_fixtures import _no_faults_left, recording_sandbox  # noqa: F401
from test_network import ForwardProxy, ca_file, proxy, tls_ca, tls_sandbox  # noqa: F401

import wrapper
from wrapper.errors import APIConnectionError, APITimeoutError
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

SCALE_MODEL = "llama-3-8b-instruct"
POOL_TIMEOUT = httpx.Timeout(10.0, pool=0.2)


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def default_http_client(mode: str, **options: Any) -> httpx.Client | httpx.AsyncClient:
    """The default client of the test's library (``DefaultHttpx2Client``, ... on httpx2)."""
    suffix = "2" if http_library().__name__ == "httpx2" else ""
    name = f"Default{'Async' if mode == 'async' else ''}Httpx{suffix}Client"
    default: Any = getattr(wrapper, name)
    return default(**options)  # type: ignore[no-any-return]


def scale_over(mode: str, base_url: str, **options: Any) -> Scale | AsyncScale:
    """A Scale client over a default HTTP client built now with ``options``, without retries."""
    http_client: Any = default_http_client(mode, **options)
    cls = Scale if mode == "sync" else AsyncScale
    return cls(
        api_key="test-key", base_url=base_url, http_client=http_client, max_retries=0, timeout=POOL_TIMEOUT
    )


async def close(client: Any) -> None:
    await call(client.close())


async def test_both_apis_complete_and_stream_over_it(recording_sandbox: Sandbox, mode: str) -> None:
    scale = scale_over(mode, recording_sandbox.scale_base_url)
    http_client: Any = default_http_client(mode)
    cls = Gradient if mode == "sync" else AsyncGradient
    gradient = cls(access_token="t0ken-x", workspace_id="ws", base_url=recording_sandbox.gradient_base_url,
                   http_client=http_client)  # fmt: skip
    try:
        assert (await call(scale.complete(SCALE_MODEL, "Alice", max_tokens=3))).response_tokens == 3
        chunks = await collect(scale.stream(SCALE_MODEL, "Alice", max_tokens=3))
        assert chunks[-1].finish_reason == "length"
        assert (await call(gradient.complete("nous-hermes2", "Is it?", guidance=["yes", "no"]))).text in (
            "yes",
            "no",
        )
    finally:
        await close(scale)
        await close(gradient)
    assert http_client.is_closed  # closing the SDK client closes the pool it was given, as before


async def test_limits_on_top_bound_the_connections(recording_sandbox: Sandbox, mode: str) -> None:
    """With one connection allowed and a stream holding it, the next call waits for the pool, then times out;
    with the default (no cap), it goes through."""
    for limits, fails in ((httpx.Limits(max_connections=1), True), (None, False)):
        options = {} if limits is None else {"limits": limits}
        scale = scale_over(mode, recording_sandbox.scale_base_url, **options)
        stream: Any = scale.stream(SCALE_MODEL, "Tell me a story", max_tokens=20)
        try:
            await call(anext(stream) if mode == "async" else next(stream))  # the stream holds its connection
            if fails:
                with pytest.raises(
                    APITimeoutError, match=r"^pool timeout: no connection to \S+ came free within 0.2 s"
                ):
                    await call(scale.complete(SCALE_MODEL, "Alice", max_tokens=2))
            else:
                assert (await call(scale.complete(SCALE_MODEL, "Alice", max_tokens=2))).response_tokens == 2
        finally:
            await call(stream.aclose() if mode == "async" else stream.close())
            await close(scale)


async def test_a_proxy_on_top_carries_every_request(
    recording_sandbox: Sandbox, net_env: pytest.MonkeyPatch, proxy: ForwardProxy, mode: str
) -> None:
    scale = scale_over(mode, recording_sandbox.scale_base_url, proxy=proxy.url)
    try:
        assert (await call(scale.complete(SCALE_MODEL, "Alice", max_tokens=2))).response_tokens == 2
    finally:
        await close(scale)
    assert proxy.seen == [("POST", f"{recording_sandbox.scale_base_url}/v4/models/{SCALE_MODEL}/completions")]


async def test_the_proxy_in_the_environment_applies_as_on_the_clients_own_pool(
    recording_sandbox: Sandbox, net_env: pytest.MonkeyPatch, proxy: ForwardProxy, mode: str
) -> None:
    net_env.setenv("HTTP_PROXY", proxy.url)
    scale = scale_over(mode, recording_sandbox.scale_base_url)
    try:
        await collect(scale.stream(SCALE_MODEL, "Alice", max_tokens=2))
    finally:
        await close(scale)
    assert [method for method, _ in proxy.seen] == ["POST"]


@pytest.mark.parametrize("as_path", [False, True])
async def test_verify_takes_a_ca_bundle(
    tls_sandbox: str, ca_file: str, net_env: pytest.MonkeyPatch, mode: str, as_path: bool
) -> None:
    trusted = scale_over(mode, tls_sandbox, verify=Path(ca_file) if as_path else ca_file)
    untrusted = scale_over(mode, tls_sandbox)
    try:
        assert (await call(trusted.complete(SCALE_MODEL, "Alice", max_tokens=2))).response_tokens == 2
        with pytest.raises(APIConnectionError, match=r"(?i)certificate"):
            await call(untrusted.complete(SCALE_MODEL, "Alice", max_tokens=2))
    finally:
        await close(trusted)
        await close(untrusted)


async def test_the_ca_bundle_in_the_environment_is_trusted_by_default(
    tls_sandbox: str, ca_file: str, net_env: pytest.MonkeyPatch, mode: str
) -> None:
    net_env.setenv("SSL_CERT_FILE", ca_file)
    scale = scale_over(mode, tls_sandbox)
    try:
        assert (await call(scale.complete(SCALE_MODEL, "Alice", max_tokens=2))).response_tokens == 2
    finally:
        await close(scale)


async def test_other_httpx_options_apply_too(server: LocalServer, mode: str) -> None:
    scale = scale_over(mode, server.url, headers={"x-team": "search"}, params={"trace": "1"})
    try:
        await call(scale.complete("m", "p"))
    finally:
        await close(scale)
    method, path, headers, _ = server.requests[0]
    assert (method, path) == ("POST", "/v4/models/m/completions?trace=1")
    assert headers["x-team"] == "search"
    assert headers["x-api-key"] == "test-key"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"limts": httpx.Limits()}, "'limts' is not a keyword argument of httpx"),
        ({"limits": 10}, "limits must be an httpx.Limits (or httpx2.Limits); got 10"),
        ({"verify": "/no/such/ca.pem"}, "verify: no CA bundle at '/no/such/ca.pem'"),
        ({"verify": 1}, "verify must be True, False, an ssl.SSLContext or the path of a CA bundle; got 1"),
        ({"verify": __file__}, "is not a PEM CA bundle"),
        ({"cert": "client.pem"}, "cert is deprecated by httpx"),
    ],
)
def test_bad_options_are_refused_by_name(mode: str, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        default_http_client(mode, **options)


async def test_they_are_the_librarys_clients_for_type_checkers_and_at_run_time(library: ModuleType) -> None:
    with default_http_client("sync") as sync_client:
        assert isinstance(sync_client, library.Client)
        assert (
            type(sync_client).__name__ == f"DefaultHttpx{'2' if library.__name__ == 'httpx2' else ''}Client"
        )
    async with default_http_client("async") as async_client:
        assert isinstance(async_client, library.AsyncClient)
