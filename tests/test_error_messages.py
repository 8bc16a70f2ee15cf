"""Errors that say what happened: the request a status error answered, a base_url that misses the API's
path, text that cannot be sent, the samples content moderation flagged."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import GRADIENT_TOKEN, SCALE_KEY, call, collect

from wrapper._cli import main
from wrapper.batch import read_results
from wrapper.errors import (
    ContentFlaggedError,
    NotFoundError,
    UnknownModelError,
    UnprocessableEntityError,
)
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

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
    client = make_client(provider, lane, base_url=wrong, max_retries=0)
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
    scale = make_client("scale", lane, base_url=sandbox.scale_base_url, max_retries=0)
    with pytest.raises(UnprocessableEntityError) as too_long:  # prompt plus max_tokens over the context
        await call(scale.complete(MODELS["scale"], "Alice", max_tokens=100_000))
    assert f"(POST {sandbox.scale_base_url}{ENDPOINTS['scale']})" in str(too_long.value)
    assert "base_url" not in str(too_long.value)

    gradient = make_client("gradient", lane, base_url=sandbox.gradient_base_url, max_retries=0)
    with pytest.raises(UnknownModelError) as unknown:  # its body names the model: no hint
        await call(gradient.complete("no-such-model", "Alice"))
    assert f"(POST {sandbox.gradient_base_url}/models/no-such-model/complete)" in str(unknown.value)
    assert "base_url" not in str(unknown.value)


async def test_the_url_in_a_message_keeps_no_secret(make_client: Any, sandbox: Sandbox, lane: str) -> None:
    """Query values may be credentials (a signed URL's): the message names each parameter, not its value
    (a base URL with user info or a query is refused when the client is built: test_client_config.py)."""
    host = sandbox.scale_base_url.removeprefix("http://")
    client = make_client("scale", lane, base_url=f"http://{host}/v4", max_retries=0)
    with pytest.raises(NotFoundError) as caught:
        await call(client.complete(MODELS["scale"], "Alice", extra_query={"key": "q-SECRET-2", "page": 1}))
    message = str(caught.value)
    for secret in ("q-SECRET-2", SCALE_KEY):
        assert secret not in message
    assert f"{host}/v4{ENDPOINTS['scale']}?key=<redacted>&page=<redacted>)" in message, message
    assert f"this client's is 'http://{host}/v4'" in message, message


# --- text UTF-8 cannot encode is refused before anything is sent ------------------------------------

LONE = "\ud800"


@pytest.mark.parametrize(
    ("provider", "model", "prompt", "params", "named"),
    [
        ("scale", MODELS["scale"], f"bad {LONE}", {}, "prompt"),
        ("gradient", MODELS["gradient"], f"bad {LONE}", {}, "prompt"),
        ("scale", MODELS["scale"], "ok", {"stop_sequences": ["end", f"x{LONE}"]}, "stop_sequences[1]"),
        ("gradient", MODELS["gradient"], "ok", {"guidance": ["yes", f"n{LONE}"]}, "guidance[1]"),
        (
            "scale",
            MODELS["scale"],
            "ok",
            {"chat_template_kwargs": {"a": [f"{LONE}"]}},
            "chat_template_kwargs['a'][0]",
        ),
        (
            "scale",
            MODELS["scale"],
            "ok",
            {"chat_template_kwargs": {f"k{LONE}": 1}},
            "a key of chat_template_kwargs",
        ),
        ("scale", MODELS["scale"], "ok", {"extra_body": {"x": f"{LONE}"}}, "extra_body['x']"),
        ("scale", MODELS["scale"], "ok", {"extra_query": {"x": f"{LONE}"}}, "extra_query['x']"),
        ("gradient", f"model{LONE}", "ok", {}, "model"),
    ],
)
async def test_a_lone_surrogate_is_a_value_error_naming_the_argument(
    make_client: Any,
    sandbox: Sandbox,
    lane: str,
    provider: str,
    model: str,
    prompt: str,
    params: Any,
    named: str,
) -> None:
    client = make_client(provider, lane, base_url=base_url(sandbox, provider))
    for attempt in (
        lambda: call(client.complete(model, prompt, **params)),
        lambda: client.stream(model, prompt, **params),  # checked when the stream is made
    ):
        with pytest.raises(ValueError, match="lone surrogate") as caught:
            await attempt()
        message = str(caught.value)
        assert message.startswith(f"{named} contains '\\ud800' at index "), message
        assert "lone surrogate" in message
    assert sandbox.stats().requests == 0


async def test_a_batch_refuses_a_prompt_with_a_lone_surrogate_as_it_refuses_an_empty_one(
    make_client: Any, sandbox: Sandbox, mode: str
) -> None:
    client = make_client("scale", mode, base_url=sandbox.scale_base_url)
    for bad, message in (
        ("", "prompt must not be empty"),
        (f"bad {LONE}", "prompt contains '\\ud800' at index 4"),
    ):
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            await collect(client.complete_many(MODELS["scale"], [bad], return_exceptions=True))
    assert sandbox.stats().requests == 0


@pytest.mark.usefixtures("clean_env")
def test_the_command_line_names_the_prompt(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--base-url", sandbox.scale_base_url, "--api-key", "key-for-the-sandbox"]
    assert main(["complete", "scale", MODELS["scale"], f"bad {LONE}", *flags]) == 2
    assert "error: prompt contains '\\ud800' at index 4" in capsys.readouterr().err

    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"prompt": "Alice", "max_tokens": 1},
        {"prompt": f"bad {LONE}"},
        {"prompt": "Alice", "stop_sequences": [f"x{LONE}"]},
    ]
    inputs.write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )  # JSON keeps the surrogate as \ud800
    assert main(["batch", "scale", MODELS["scale"], str(inputs), "-o", str(output), *flags]) == 1
    results = {result["index"]: result for result in read_results(str(output))}
    assert results[0]["text"]
    assert results[1]["error"]["message"].startswith("prompt contains '\\ud800' at index 4")
    assert results[2]["error"]["message"].startswith("stop_sequences[0] contains '\\ud800' at index 1")
    assert sandbox.stats().requests == 1


# --- content moderation's samples are in the message ------------------------------------------------


async def test_a_flagged_content_error_shows_its_samples(
    make_client: Any, sandbox: Sandbox, lane: str
) -> None:
    client = make_client("gradient", lane, base_url=sandbox.gradient_base_url, max_retries=0)
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
