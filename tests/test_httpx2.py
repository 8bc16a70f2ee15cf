"""httpx2 beside httpx: an httpx2 client is taken wherever an httpx one is, and the clients' own pools
speak httpx2 when ``COMPLETION_CLIENTS_HTTP=httpx2``; what a caller sees (raw responses, the responses
and causes of errors) is httpx2's then. httpx2 stays optional: never imported unless asked for.

The client lanes and the reliability tests run on both libraries through the ``library`` fixture; this
file holds what only httpx2 has: the entry points that take a client, the setting, the User-Agent,
what an absent httpx2 does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from helpers import (
    CLASSES,
    ENV_VARS,
    LIBRARY_ENV,
    LocalServer,
    call,
    collect,
    install_command,
    json_reply,
    scale_body,
)

import wrapper
from wrapper import Route, Router
from wrapper._cli import main
from wrapper.errors import APIConnectionError, InternalServerError
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
MAX_TOKENS = {"scale": {"max_tokens": 3}, "gradient": {"max_generated_token_count": 3}}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


def _client(sandbox: Sandbox, api: str, mode: str, **options: Any) -> Any:
    credentials = {"api_key": "k"} if api == "scale" else {"access_token": "t", "workspace_id": "w"}
    url = sandbox.scale_base_url if api == "scale" else sandbox.gradient_base_url
    return CLASSES[api][mode == "async"](**credentials, base_url=url, max_retries=0, **options)


@pytest.mark.parametrize("api", ["scale", "gradient"])
async def test_each_api_completes_streams_and_batches_on_an_httpx2_client(
    sandbox: Sandbox, api: str, mode: str
) -> None:
    http_client = httpx2.Client() if mode == "sync" else httpx2.AsyncClient()
    client = _client(sandbox, api, mode, http_client=http_client)
    model, limit = MODELS[api], MAX_TOKENS[api]
    try:
        raw = await call(client.with_raw_response.complete(model, "Alice", **limit))
        assert type(raw.http_response) is httpx2.Response
        assert raw.parse().text
        chunks = await collect(client.stream(model, "Alice", **limit))
        assert chunks[-1].finish_reason is not None
        batch = await collect(client.complete_many(model, ["a", "b", "c"], **limit))
        assert sorted(result.index for result in batch if result.ok) == [0, 1, 2]
        copy = client.with_options(timeout=5)
        await call(copy.complete(model, "Alice", **limit))
        await call(copy.close())  # a copy closes alone: the pool stays open for the client
        assert not http_client.is_closed
        assert (await call(client.complete(model, "Alice", **limit))).text
    finally:
        await call(client.close())
    assert http_client.is_closed


@pytest.mark.parametrize("lane", ["sync", "aiohttp", "httpx2"])
async def test_own_pools_speak_httpx2_when_the_setting_says_so(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch, lane: str
) -> None:
    """Every lane of a default client: its User-Agent names httpx2, and its responses are httpx2's (the
    aiohttp lane's too); the async ``httpx2`` lane is the one a proxy in the environment chooses."""
    monkeypatch.setenv(LIBRARY_ENV, "httpx2")
    if lane == "httpx2":
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # never reached: NO_PROXY covers loopback
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server.script(json_reply(200, scale_body()), json_reply(503, {"detail": "busy"}))
    client = (Scale if lane == "sync" else AsyncScale)(api_key="k", base_url=server.url, max_retries=0)
    try:
        raw = await call(client.with_raw_response.complete("m", "p"))
        with pytest.raises(InternalServerError) as failed:
            await call(client.complete("m", "p"))
    finally:
        await call(client.close())
    assert type(raw.http_response) is httpx2.Response
    assert type(failed.value.response) is httpx2.Response
    assert type(failed.value.request) is httpx2.Request
    agents = [headers["user-agent"] for _, _, headers, _ in server.requests]
    assert [agent.split()[-1] for agent in agents] == [f"httpx2/{httpx2.__version__}"] * 2


async def test_a_connection_error_is_the_same_with_httpx2s_cause(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = {}
    for library in ("httpx", "httpx2"):
        monkeypatch.setenv(LIBRARY_ENV, library)
        client = (Scale if mode == "sync" else AsyncScale)(
            api_key="k", base_url="http://127.0.0.1:1", max_retries=0
        )
        with pytest.raises(APIConnectionError) as failed:
            await call(client.complete("m", "p"))
        await call(client.close())
        assert type(failed.value.__cause__).__module__.partition(".")[0] == library
        messages[library] = str(failed.value)
    assert messages["httpx2"] == messages["httpx"]


def test_httpx2_timeouts_and_limits_are_taken_as_httpxs() -> None:
    with Scale(
        api_key="k", timeout=httpx2.Timeout(3, read=2), limits=httpx2.Limits(max_connections=5)
    ) as scale:
        assert scale.timeout == httpx.Timeout(3, read=2)
        assert scale.with_options(timeout=httpx2.Timeout(1)).timeout == httpx.Timeout(1)
    with pytest.raises(ValueError, match=r"timeout: httpx.Timeout's read must be None or a number > 0"):
        Scale(api_key="k", timeout=httpx2.Timeout(3, read=-1))


def test_a_client_of_the_wrong_kind_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"http_client must be an httpx.Client or an httpx2.Client; got AsyncClient"
    ):
        Scale(api_key="k", http_client=httpx2.AsyncClient())  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"http_client must be an httpx.AsyncClient or an httpx2.AsyncClient; got Client"
    ):
        AsyncGradient(access_token="t", workspace_id="w", http_client=httpx2.Client())  # type: ignore[arg-type]


def test_the_setting_names_a_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LIBRARY_ENV, "requests")
    with pytest.raises(
        ValueError, match=r"COMPLETION_CLIENTS_HTTP must be 'httpx' or 'httpx2'.*got 'requests'"
    ):
        Gradient(access_token="t", workspace_id="w")
    assert wrapper.HTTP_LIBRARY_ENV == LIBRARY_ENV


async def test_router_routes_take_httpx2_clients(sandbox: Sandbox, mode: str) -> None:
    scale = _client(
        sandbox, "scale", mode, http_client=httpx2.Client() if mode == "sync" else httpx2.AsyncClient()
    )
    gradient = _client(sandbox, "gradient", mode)
    routes = [Route(scale, MODELS["scale"], name="s"), Route(gradient, MODELS["gradient"], name="g")]
    router: Any = Router(routes) if mode == "sync" else wrapper.AsyncRouter(routes)
    try:
        results = await collect(router.complete_many([f"Alice {i}" for i in range(6)], max_tokens=3))
        assert all(result.ok for result in results)
        assert {result.completion.route for result in results} == {"s", "g"}
    finally:
        await call(router.close())
        await call(scale.close())
        await call(gradient.close())


def test_the_command_line_follows_the_setting(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LIBRARY_ENV, "httpx2")
    assert main(["complete", "scale", "m", "Alice", "--api-key", "k", "--base-url", server.url]) == 0
    assert server.requests[0][2]["user-agent"].split()[-1].startswith("httpx2/")


async def test_framework_models_take_httpx2_backed_clients(sandbox: Sandbox) -> None:
    from wrapper.langchain import ScaleLLM
    from wrapper.llama_index import GradientLLM

    scale = _client(sandbox, "scale", "sync", http_client=httpx2.Client())
    gradient = _client(sandbox, "gradient", "async", http_client=httpx2.AsyncClient())
    try:
        assert ScaleLLM(model=MODELS["scale"], client=scale, max_tokens=3).invoke("Alice")
        llm = GradientLLM(model=MODELS["gradient"], async_client=gradient, max_generated_token_count=3)
        assert (await llm.acomplete("Alice")).text
    finally:
        scale.close()
        await gradient.close()


OPTIONAL = """
import asyncio, os, sys
sys.modules["httpx2"] = None  # as if not installed: importing it raises ImportError
import wrapper
from wrapper.scale import AsyncScale, Scale

url = sys.argv[1]
with Scale(api_key="k", base_url=url) as scale:
    assert scale.complete("m", "p").text == "Paris"
with Scale(api_key="k", base_url=url, http_client=wrapper.DefaultHttpxClient()) as scale:
    assert scale.complete("m", "p").text == "Paris"

async def main():
    async with AsyncScale(api_key="k", base_url=url) as client:
        assert (await client.complete("m", "p")).text == "Paris"
asyncio.run(main())

os.environ["COMPLETION_CLIENTS_HTTP"] = "httpx2"
for build in (lambda: Scale(api_key="k"), lambda: wrapper.DefaultAsyncHttpx2Client):
    try:
        build()
    except ModuleNotFoundError as exc:
        print(exc)
"""


def test_without_httpx2_everything_else_works_and_asking_for_it_names_the_extra(server: LocalServer) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(OPTIONAL), server.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    for line in lines:
        assert line.startswith("httpx2 is not installed: "), line
        assert install_command("httpx2").search(line), line


UNTOUCHED = """
import asyncio, sys
import wrapper, wrapper.router
from wrapper.scale import AsyncScale, Scale

url = sys.argv[1]
with Scale(api_key="k", base_url=url) as scale:
    scale.complete("m", "p")
    list(scale.complete_many("m", ["a", "b"]))
with Scale(api_key="k", base_url=url, http_client=wrapper.DefaultHttpxClient()) as scale:
    scale.complete("m", "p")

async def main():
    async with AsyncScale(api_key="k", base_url=url) as client:
        await client.complete("m", "p")
    async with AsyncScale(api_key="k", base_url=url, http_client=wrapper.DefaultAsyncHttpxClient()) as client:
        await client.complete("m", "p")
asyncio.run(main())
print(sorted(name for name in sys.modules if name.startswith(("httpx2", "httpcore2"))))
"""


def test_httpx2_is_never_imported_unless_asked_for(server: LocalServer) -> None:
    """httpx2 installed (as here) but not asked for: no client, default client or call imports it."""
    env = {name: value for name, value in os.environ.items() if name != LIBRARY_ENV}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(UNTOUCHED), server.url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
