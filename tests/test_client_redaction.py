"""Credentials never show: not in repr(), exception messages or logs; debug logging is opt-in and lazy."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from helpers import GRADIENT_BODY, GRADIENT_TOKEN, SCALE_KEY, LocalServer, call, json_reply, scale_body

import wrapper._core.client
from wrapper.errors import APIError, AuthenticationError, ContentFlaggedError

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

SECRETS = (SCALE_KEY, GRADIENT_TOKEN)


def echo(status: int, provider: str) -> Any:
    """A server that quotes the credential it was sent back in its error body."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent = request.headers.get("x-api-key") or request.headers["authorization"]
        if provider == "gradient" and status == 400:
            body = {"type": "flaggedContent", "message": f"flagged {sent}", "payload": {"flaggedContent": []}}
        else:
            body = {"detail": f"invalid credential: {sent}"}
        return httpx.Response(status, json=body)

    return handler


def assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_repr_of_clients_and_copies(make_client: Any, mode: str, provider: str) -> None:
    client = make_client(provider, mode, echo(200, provider))
    for shown in (client, client.with_options(timeout=3, max_retries=1)):
        assert_clean(repr(shown))
        assert_clean(str(shown))
        assert "base_url='https://api.test/api'" in repr(shown)


@pytest.mark.parametrize(
    ("provider", "status", "cls"),
    [("scale", 401, AuthenticationError), ("gradient", 400, ContentFlaggedError)],
)
async def test_errors_that_quote_the_credential(
    make_client: Any, mode: str, provider: str, status: int, cls: Any
) -> None:
    client = make_client(provider, mode, echo(status, provider), max_retries=0)
    with pytest.raises(cls) as caught:
        await call(client.complete("m", "p"))
    assert_clean(str(caught.value))
    assert_clean(repr(caught.value))
    assert "<redacted>" in str(caught.value)


async def test_connection_errors(make_client: Any, mode: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused while sending {request.headers['x-api-key']}")

    with pytest.raises(APIError) as caught:
        await call(make_client("scale", mode, handler, max_retries=0).complete("m", "p"))
    assert_clean(str(caught.value))


async def test_debug_log(
    make_client: Any, server: LocalServer, mode: str, caplog: pytest.LogCaptureFixture, sleeps: list[float]
) -> None:
    server.script(
        json_reply(503, {"detail": "busy"}), json_reply(200, scale_body()), json_reply(200, GRADIENT_BODY)
    )
    with caplog.at_level(logging.DEBUG, logger="wrapper"):
        await call(make_client("scale", mode, base_url=server.url).complete("m", "p"))
        await call(
            make_client("gradient", mode, base_url=server.url + "/api", max_retries=0).complete("m", "p")
        )
    text = caplog.text
    assert_clean(text)
    records = [r for r in caplog.records if r.name == "wrapper"]
    assert [r.levelno for r in records] == [logging.DEBUG, logging.INFO, logging.DEBUG, logging.DEBUG]
    first = records[0].getMessage()
    assert f"POST {server.url}/v4/models/m/completions -> 503" in first
    assert "'x-api-key': '<redacted>'" in first
    assert "'x-selected-account-id': 'acct-1'" in first
    assert "retrying POST" in records[1].getMessage()
    assert "'authorization': '<redacted>'" in records[3].getMessage()


async def test_nothing_is_formatted_when_debug_is_off(
    make_client: Any, mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def forbidden(headers: Any) -> Any:
        raise AssertionError("formatted a log line nobody reads")

    monkeypatch.setattr(wrapper._core.client, "redacted_headers", forbidden)
    with caplog.at_level(logging.INFO, logger="wrapper"):
        result = await call(
            make_client("scale", mode, lambda r: httpx.Response(200, json=scale_body())).complete("m", "p")
        )
    assert result.text == "Paris"
    assert caplog.records == []


async def test_a_toy_credential_does_not_garble_messages(make_client: Any) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"type": "unknownBaseModel", "message": "Model 'x' does not exist"})

    client = make_client("gradient", "sync", handler, access_token="t", max_retries=0)
    with pytest.raises(APIError, match="Model 'x' does not exist"):
        client.complete("x", "q")
