"""Errors that say what happened: the request a status error answered, a base_url that misses the API's
path, text that cannot be sent, the samples content moderation flagged."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from helpers import GRADIENT_TOKEN, SCALE_KEY, call, collect, lane_client

from wrapper.errors import (
    ContentFlaggedError,
    NotFoundError,
    UnknownModelError,
    UnprocessableEntityError,
)
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
ENDPOINTS = {
    "scale": f"/v4/models/{MODELS['scale']}/completions",
    "gradient": f"/models/{MODELS['gradient']}/complete",
}
DEFAULTS = {"scale": Scale.API.default_base_url, "gradient": Gradient.API.default_base_url}


def base_url(sandbox: Sandbox, provider: str) -> str:
    return sandbox.scale_base_url if provider == "scale" else sandbox.gradient_base_url


# --- status errors name the request; a 404 points at base_url ---------------------------------------

# Each API's base URL with one path segment too many (Scale's ``.../v4``, the ``/v4`` its paths already
# start with) or one too few (Gradient's without ``/api``).
WRONG_BASES = {"scale": "/v4", "gradient": "/api"}


def wrong_base(sandbox: Sandbox, provider: str) -> str:
    if provider == "scale":
        return sandbox.scale_base_url + WRONG_BASES["scale"]
    return sandbox.gradient_base_url.removesuffix(WRONG_BASES["gradient"])


@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_a_404_names_the_url_requested_and_points_at_base_url(
    make_client: Any, sandbox: Sandbox, lane: str, provider: str
) -> None:
    wrong = wrong_base(sandbox, provider)
    client = lane_client(make_client, provider, lane, wrong, max_retries=0)
    for attempt in (
        lambda: call(client.complete(MODELS[provider], "Alice")),
        lambda: collect(client.stream(MODELS[provider], "Alice")),
    ):
        with pytest.raises(NotFoundError) as caught:
            await attempt()
        message = str(caught.value)
        assert f"(POST {wrong}{ENDPOINTS[provider]})" in message, message
        assert f"check base_url: this client's is {wrong!r}" in message, message
        assert f"the default is {DEFAULTS[provider]!r}" in message, message
        assert f"{ENDPOINTS[provider]!r} is appended to it" in message, message


async def test_other_status_errors_name_the_request_without_the_base_url_hint(
    make_client: Any, sandbox: Sandbox, lane: str
) -> None:
    scale = lane_client(make_client, "scale", lane, sandbox.scale_base_url, max_retries=0)
    with pytest.raises(UnprocessableEntityError) as too_long:  # prompt plus max_tokens over the context
        await call(scale.complete(MODELS["scale"], "Alice", max_tokens=100_000))
    assert f"(POST {sandbox.scale_base_url}{ENDPOINTS['scale']})" in str(too_long.value)
    assert "base_url" not in str(too_long.value)

    gradient = lane_client(make_client, "gradient", lane, sandbox.gradient_base_url, max_retries=0)
    with pytest.raises(UnknownModelError) as unknown:  # its body names the model: no hint
        await call(gradient.complete("no-such-model", "Alice"))
    assert f"(POST {sandbox.gradient_base_url}/models/no-such-model/complete)" in str(unknown.value)
    assert "base_url" not in str(unknown.value)


async def test_the_url_in_a_message_keeps_no_secret(make_client: Any, sandbox: Sandbox, lane: str) -> None:
    host = sandbox.scale_base_url.removeprefix("http://")
    client = lane_client(make_client, "scale", lane, f"http://user:pw-SECRET-1@{host}/v4", max_retries=0)
    with pytest.raises(NotFoundError) as caught:
        await call(client.complete(MODELS["scale"], "Alice", extra_query={"key": "q-SECRET-2", "page": 1}))
    message = str(caught.value)
    for secret in ("pw-SECRET-1", "q-SECRET-2", SCALE_KEY):
        assert secret not in message
    assert f"{host}/v4{ENDPOINTS['scale']}?key=<redacted>&page=<redacted>)" in message, message
    assert f"this client's is 'http://<redacted>@{host}/v4'" in message, message


# --- content moderation's samples are in the message ------------------------------------------------


async def test_a_flagged_content_error_shows_its_samples(
    make_client: Any, sandbox: Sandbox, lane: str
) -> None:
    client = lane_client(make_client, "gradient", lane, sandbox.gradient_base_url, max_retries=0)
    with pytest.raises(ContentFlaggedError) as caught:
        await call(client.complete(MODELS["gradient"], "contraband and MALWARE"))
    assert caught.value.samples == ["contraband", "MALWARE"]
    assert "The query contains flagged content (flagged: 'contraband', 'MALWARE')" in str(caught.value)
    assert GRADIENT_TOKEN not in str(caught.value)


def test_a_long_flagged_sample_is_cut_in_the_message(make_client: Any) -> None:
    sample = "x" * 1000
    body = {
        "type": "flaggedContent",
        "message": "flagged",
        "payload": {"flaggedContent": [{"sample": sample}]},
    }
    client = make_client("gradient", "sync", lambda request: httpx.Response(400, json=body), max_retries=0)
    with pytest.raises(ContentFlaggedError) as caught:
        client.complete("m", "q")
    assert caught.value.samples == [sample]
    assert sample not in str(caught.value)
    assert f"(flagged: '{'x' * 20}" in str(caught.value)
