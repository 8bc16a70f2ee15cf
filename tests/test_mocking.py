"""Users' HTTP mocks see every default client: respx and pytest-httpx, sync and async, every method.

The clients are built exactly as in production (no ``http_client``): the async ones notice that httpx's
transport is patched and send through httpx instead of their aiohttp fast lane.
"""

from __future__ import annotations

import json

import httpcore
import httpx
import pytest
import respx
from helpers import CREDENTIALS, LocalServer
from httpx2_mocks._answers import BASE_URLS, CLIENTS, exercise
from httpx2_mocks._answers import answer as answer_with
from pytest_httpx import HTTPXMock

from wrapper.scale import AsyncScale


def answer(request: httpx.Request) -> httpx.Response:
    """What the mocked API says (``httpx2_mocks/_answers.py``), as an ``httpx.Response``."""
    response: httpx.Response = answer_with(request, httpx)
    return response


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("provider", "mode"), CLIENTS)
async def test_respx_intercepts_every_default_client(provider: str, mode: str) -> None:
    with respx.mock(assert_all_mocked=True) as router:
        route = router.post(url__startswith=BASE_URLS[provider]).mock(side_effect=answer)
        await exercise(provider, mode)
    assert route.call_count == 5  # complete, stream, three prompts of the batch
    sent = [json.loads(call.request.content) for call in route.calls]
    assert sorted(body.get("prompt", body.get("query")) for body in sent) == ["a", "b", "c", "one", "two"]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("provider", "mode"), CLIENTS)
async def test_pytest_httpx_intercepts_every_default_client(
    httpx_mock: HTTPXMock, provider: str, mode: str
) -> None:
    httpx_mock.add_callback(answer, method="POST", is_reusable=True)
    await exercise(provider, mode)
    requests = httpx_mock.get_requests()
    assert len(requests) == 5
    assert all(str(r.url).startswith(BASE_URLS[provider]) for r in requests)
    assert all(r.headers["user-agent"].startswith("completion-clients/") for r in requests)


@pytest.mark.usefixtures("clean_env")
async def test_an_instrumentation_of_httpcore_sees_the_async_requests(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As OpenTelemetry's httpx instrumentation wraps httpcore's pool, a wrapper installed after the client
    was built sees its requests (which then go through httpx), and the fast lane returns once it is gone."""
    original = httpcore.AsyncConnectionPool.handle_async_request
    seen: list[str] = []

    async def traced(self: httpcore.AsyncConnectionPool, request: httpcore.Request) -> httpcore.Response:
        seen.append(request.url.target.decode())
        return await original(self, request)

    async with AsyncScale(**CREDENTIALS["scale"], base_url=server.url, timeout=10) as scale:
        assert (await scale.complete("m", "before")).text == "Paris"
        monkeypatch.setattr(httpcore.AsyncConnectionPool, "handle_async_request", traced)
        assert (await scale.complete("m", "traced")).text == "Paris"
        monkeypatch.undo()
        assert (await scale.complete("m", "after")).text == "Paris"
    assert seen == ["/v4/models/m/completions"]
    assert [body["prompt"] for *_, body in server.requests] == ["before", "traced", "after"]
