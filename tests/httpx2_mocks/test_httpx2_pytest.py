"""httpx2-pytest (pytest-httpx's API on httpx2) sees every call of every default client, sync and async,
once the clients' pools speak httpx2 (``COMPLETION_CLIENTS_HTTP=httpx2``): run by ``nox -s httpx2_mocks``."""

from __future__ import annotations

from typing import Any

import pytest
from _answers import BASE_URLS, CLIENTS, PROMPTS, answer, exercise, prompts


@pytest.fixture(autouse=True)
def on_httpx2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPLETION_CLIENTS_HTTP", "httpx2")


@pytest.mark.parametrize(("api", "mode"), CLIENTS)
async def test_every_call_of_every_default_client_is_mocked(httpx2_mock: Any, api: str, mode: str) -> None:
    httpx2_mock.add_callback(answer, method="POST", is_reusable=True)
    await exercise(api, mode)
    requests = httpx2_mock.get_requests()
    assert prompts(requests) == sorted(PROMPTS)
    assert all(str(request.url).startswith(BASE_URLS[api]) for request in requests)
    assert all(request.headers["user-agent"].split()[-1].startswith("httpx2/") for request in requests)
