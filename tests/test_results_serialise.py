"""Results serialise: ``to_dict()`` and ``to_json()`` round-trip through ``json``, and ``from_dict()``."""
# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import _no_faults_left, gradient, recording_sandbox, scale  # noqa: F401

from wrapper import Completion, CompletionChunk
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL, GRADIENT_MODEL = "llama-3-8b-instruct", "nous-hermes2"


def assert_round_trips(result: Completion | CompletionChunk) -> dict[str, Any]:
    """``result`` through ``to_json``, ``json.loads`` and ``from_dict`` comes back equal, raw included."""
    data: dict[str, Any] = json.loads(result.to_json())
    assert data == result.to_dict()
    back = type(result).from_dict(data)
    assert back == result
    assert back.raw == result.raw
    assert back.request_id == result.request_id is not None
    assert back.to_dict() == data
    return data


@pytest.fixture
def async_clients(recording_sandbox: Sandbox) -> tuple[AsyncScale, AsyncGradient]:
    return (
        AsyncScale(api_key="test-key", base_url=recording_sandbox.scale_base_url, max_retries=0),
        AsyncGradient(access_token="test-token", workspace_id="ws",
                      base_url=recording_sandbox.gradient_base_url, max_retries=0),
    )  # fmt: skip


def test_a_scale_completion_with_logprobs_round_trips(scale: Scale) -> None:
    result = scale.complete(SCALE_MODEL, "Alice", max_tokens=4, logprobs=True, top_logprobs=2)
    data = assert_round_trips(result)
    assert (data["text"], data["finish_reason"]) == (result.text, result.finish_reason)
    assert (data["prompt_tokens"], data["response_tokens"]) == (result.prompt_tokens, 4)
    assert data["raw"] == result.raw.to_dict()
    assert result.logprobs is not None
    first = data["logprobs"][0]
    assert first["token"] == result.logprobs[0].token
    assert [set(top) for top in first["top_logprobs"]] == [{"token", "logprob"}] * 2
    assert "headers" not in data


def test_a_gradient_completion_round_trips_with_its_own_raw(gradient: Gradient) -> None:
    result = gradient.complete(GRADIENT_MODEL, "Is the sky blue?", guidance=["yes", "no"])
    data = assert_round_trips(result)
    assert data["raw"]["generatedOutput"] == result.text  # the wire's own names, as the API sent them
    assert data["prompt_tokens"] is data["response_tokens"] is data["logprobs"] is None


def test_every_chunk_of_a_stream_round_trips(scale: Scale, gradient: Gradient) -> None:
    chunks = list(scale.stream(SCALE_MODEL, "Tell me a story", max_tokens=6))
    chunks += list(gradient.stream(GRADIENT_MODEL, "Hi", max_generated_token_count=3))
    assert len(chunks) > 2
    for chunk in chunks:
        assert_round_trips(chunk)
    assert json.loads(chunks[-1].to_json())["finish_reason"] == "length"


async def test_async_results_round_trip(async_clients: tuple[AsyncScale, AsyncGradient]) -> None:
    async_scale, async_gradient = async_clients
    async with async_scale, async_gradient:
        assert_round_trips(await async_scale.complete(SCALE_MODEL, "Alice", max_tokens=3))
        assert_round_trips(
            await async_gradient.complete(GRADIENT_MODEL, "Alice", max_generated_token_count=3)
        )
        async for chunk in async_scale.stream(SCALE_MODEL, "Alice", max_tokens=3):
            assert_round_trips(chunk)


def test_to_json_writes_one_line_for_json_lines(scale: Scale) -> None:
    result = scale.complete(SCALE_MODEL, "Alice", max_tokens=3)
    line = result.to_json(indent=None)
    assert "\n" not in line
    assert json.loads(line) == result.to_dict()
    assert result.to_json().count("\n") > 5  # indented by default, as openai-python's to_json


def test_from_dict_keeps_the_kind_of_result(scale: Scale) -> None:
    data = scale.complete(SCALE_MODEL, "Alice", max_tokens=3).to_dict()
    assert type(CompletionChunk.from_dict(data)) is CompletionChunk
    assert type(Completion.from_dict(data)) is Completion


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"text": 3}, "'text' must be a string; got 3"),
        ({"text": None}, "'text' must be a string; got None"),
        ({"prompt_tokens": True}, "'prompt_tokens' must be an integer or None; got True"),
        ({"finish_reason": 1}, "'finish_reason' must be a string or None"),
        ({"raw": [1]}, "'raw' must be a mapping"),
        ({"logprobs": [{"token": "a"}]}, "each logprobs item must be"),
        ({"raw_type": "os.system"}, "'raw_type' must name a generated model class"),
        ({"raw_type": "generated.scale.models.NoSuchModel"}, "'raw_type' must name a generated model class"),
        ({"raw_type": "generated.CompletionResponse"}, "'raw_type' must name a generated model class"),
        ({"raw": {"no": "completions"}}, "'raw' does not match CompletionResponse"),
    ],
)
def test_from_dict_refuses_a_dict_it_did_not_write(
    scale: Scale, change: dict[str, Any], message: str
) -> None:
    data = scale.complete(SCALE_MODEL, "Alice", max_tokens=3).to_dict() | change
    with pytest.raises(ValueError, match=r"^Completion\.from_dict: ") as caught:
        Completion.from_dict(data)
    assert message in str(caught.value)


def test_raw_type_names_the_generated_tree_wherever_it_is_installed(
    scale: Scale, gradient: Gradient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``generated.<api>.models.<Class>``, as results saved before the generated code was installed inside
    ``wrapper`` say; reading one never imports an application's own ``generated`` package."""
    for api in ("scale", "gradient"):
        (tmp_path / "generated" / api).mkdir(parents=True)
        (tmp_path / "generated" / api / "models.py").write_text("raise ImportError('the wrong generated')\n")
    monkeypatch.syspath_prepend(tmp_path)
    results = {
        "scale": scale.complete(SCALE_MODEL, "Alice", max_tokens=3),
        "gradient": gradient.complete(GRADIENT_MODEL, "Alice", max_generated_token_count=3),
    }
    for api, result in results.items():
        data = result.to_dict()
        assert data["raw_type"] == f"generated.{api}.models.{type(result.raw).__name__}"
        assert Completion.from_dict(data).raw == result.raw  # not ImportError from the wrong one


def test_from_dict_names_a_missing_key() -> None:
    with pytest.raises(ValueError, match="the 'text' key is missing"):
        Completion.from_dict({})
    with pytest.raises(ValueError, match="needs a mapping"):
        Completion.from_dict("text")  # type: ignore[arg-type]
