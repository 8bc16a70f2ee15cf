"""Results serialise: ``to_dict()`` and ``to_json()`` round-trip through ``json``, and ``from_dict()``."""
# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import _no_faults_left, gradient, recording_sandbox, scale  # noqa: F401

from wrapper import Completion, CompletionChunk
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.router import Route, Router
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL, GRADIENT_MODEL = "llama-3-8b-instruct", "nous-hermes2"
DOCS = Path(__file__).resolve().parents[1] / "docs"
JSON_TYPES = {
    "string": str,
    "integer": int,
    "boolean": bool,
    "array": list,
    "object": dict,
    "null": type(None),
}


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


def documented_keys() -> dict[str, set[type]]:
    """The table of ``to_dict()``'s keys on docs/reference/results.md: each key and its JSON types."""
    page = (DOCS / "reference" / "results.md").read_text(encoding="utf-8")
    section = page.split("## `to_dict()`: every key\n", 1)[1].split("\n::: ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([\w ]+?) \|", section, re.MULTILINE)
    return {key: {JSON_TYPES[name] for name in types.split(" or ")} for key, types in rows}


def test_the_docs_list_every_key_of_to_dict_with_its_json_types(scale: Scale, gradient: Gradient) -> None:
    """The reference's table has exactly the keys ``to_dict()`` gives, each value of a JSON type it names,
    whatever the result: Scale's with logprobs and without, a stream's chunks, Gradient's, a router's;
    and the clients guide names each key."""
    with Router([Route(scale, SCALE_MODEL, name="us")]) as router:
        results = [
            scale.complete(SCALE_MODEL, "Alice", max_tokens=3, logprobs=True),
            *scale.stream(SCALE_MODEL, "Alice", max_tokens=3),
            gradient.complete(GRADIENT_MODEL, "Alice", max_generated_token_count=3),
            router.complete("Alice", max_tokens=3),
        ]
    documented = documented_keys()
    seen: dict[str, set[type]] = {key: set() for key in documented}
    for result in results:
        data = result.to_dict()
        assert list(data) == list(documented), "docs/reference/results.md's table, in to_dict()'s order"
        for key, value in data.items():
            seen[key].add(type(value))
    undocumented = {key: types - documented[key] for key, types in seen.items() if types - documented[key]}
    assert not undocumented, "types to_dict() gave that the table does not name"
    guide = (DOCS / "clients.md").read_text(encoding="utf-8").split("### Results as JSON", 1)[1]
    assert [key for key in documented if f"`{key}`" not in guide.split("```", 1)[0]] == []
