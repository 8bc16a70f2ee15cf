"""pytest-httpx2 (respx's router on httpx2's httpcore: its routes answer with httpx's responses) sees
every call of every default client, sync and async, once the clients' pools speak httpx2
(``COMPLETION_CLIENTS_HTTP=httpx2``): run by ``nox -s httpx2_mocks``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _answers import BASE_URLS, CLIENTS, PROMPTS, answer, exercise, prompts


@pytest.fixture(autouse=True)
def on_httpx2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPLETION_CLIENTS_HTTP", "httpx2")


@pytest.mark.parametrize(("api", "mode"), CLIENTS)
async def test_every_call_of_every_default_client_is_mocked(httpx2_mock: Any, api: str, mode: str) -> None:
    route = httpx2_mock.post(url__startswith=BASE_URLS[api]).mock(side_effect=lambda r: answer(r, httpx))
    await exercise(api, mode)
    assert route.call_count == 5
    assert prompts([call.request for call in route.calls]) == sorted(PROMPTS)
    assert all(call.request.headers["user-agent"].split()[-1].startswith("httpx2/") for call in route.calls)
