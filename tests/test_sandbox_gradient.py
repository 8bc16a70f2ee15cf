"""The sandbox's Gradient API, driven through ``wrapper.gradient``: parameters and every error variant."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from sandbox_fixtures import _no_faults_left, gradient, recording_sandbox  # noqa: F401

from wrapper import errors
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox

MODEL = "nous-hermes2"
_TOKEN = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")


def test_temperature_zero_gives_the_same_text_every_time(gradient: Gradient) -> None:
    texts = {gradient.complete(MODEL, "Alice was", temperature=0.0).text for _ in range(3)}
    assert len(texts) == 1
    assert texts.pop().strip()


def test_max_generated_token_count_bounds_the_output(gradient: Gradient) -> None:
    full = gradient.complete(MODEL, "The Rabbit", max_generated_token_count=60, temperature=0.0)
    for n in (1, 4, 9):
        r = gradient.complete(MODEL, "The Rabbit", max_generated_token_count=n, temperature=0.0)
        assert len(_TOKEN.findall(r.text)) <= n
        assert r.finish_reason == "length"
        assert full.text.startswith(r.text)


def test_top_k_and_top_p_narrow_sampling_to_the_greedy_choice(gradient: Gradient) -> None:
    greedy = gradient.complete(MODEL, "The Rabbit", max_generated_token_count=20, temperature=0.0).text
    assert (
        gradient.complete(MODEL, "The Rabbit", max_generated_token_count=20, temperature=2.0, top_k=1).text
        == greedy
    )
    top_p = gradient.complete(MODEL, "The Rabbit", max_generated_token_count=20, temperature=2.0, top_p=1e-9)
    assert top_p.text == greedy


@pytest.mark.parametrize(
    ("query", "choices"),
    [
        ("Is the rabbit late?", ["yes", "no"]),
        ("Alice drank from the", ["bottle", "cake", "key", "teapot"]),
        ("The White Rabbit took a watch out of its", ["hat", "waistcoat-pocket", "x"]),
    ],
)
def test_guidance_returns_one_of_the_choices(gradient: Gradient, query: str, choices: list[str]) -> None:
    for temperature in (0.0, 1.0):
        r = gradient.complete(MODEL, query, guidance=choices, temperature=temperature)
        assert r.text in choices


def test_guidance_picks_the_choice_the_model_finds_most_likely(gradient: Gradient) -> None:
    r = gradient.complete(
        MODEL, "The White Rabbit took a watch out of its", guidance=["teapot", "waistcoat-pocket"]
    )
    assert r.text == "waistcoat-pocket"


def test_the_adapter_and_a_rag_query_complete(gradient: Gradient) -> None:
    assert gradient.complete("alice-adapter_model_adapter", "Alice", max_generated_token_count=5).text
    assert gradient.complete(MODEL, "Where is the golden key?", rag_collection="wonderland").text


@pytest.mark.parametrize(
    ("model", "query", "params", "error"),
    [
        ("no-such-model", "Alice", {}, errors.UnknownBaseModelError),
        ("nope_model_adapter", "Alice", {}, errors.UnknownModelAdapterError),
        ("llama2-7b-chat", "Alice", {"guidance": ["yes", "no"]}, errors.GuidanceNotSupportedError),
        (MODEL, "Alice", {"rag_collection": "no-such-collection"}, errors.UnknownRagCollectionError),
        (MODEL, "zzz qqq", {"rag_collection": "wonderland"}, errors.NoRagDocumentsFoundError),
        (
            MODEL,
            "Alice",
            {"rag_collection": "wonderland", "auto_template": False},
            errors.RagRequiresAutoTemplatingError,
        ),
        (MODEL, "How are explosives made?", {}, errors.ContentFlaggedError),
        (MODEL, "Alice __fail__", {}, errors.GenerationFailedError),
        ("llama2-7b-chat", "Alice " * 600, {}, errors.UnprocessableContentError),
    ],
)
def test_every_error_variant_has_a_trigger_and_maps_to_its_class(
    gradient: Gradient, model: str, query: str, params: dict[str, Any], error: type[errors.GradientError]
) -> None:
    with pytest.raises(error) as info:
        gradient.complete(model, query, **params)
    assert 400 <= info.value.status_code < 500


def test_flagged_content_names_the_samples(gradient: Gradient) -> None:
    with pytest.raises(errors.ContentFlaggedError) as info:
        gradient.complete(MODEL, "contraband and MALWARE")
    assert info.value.samples == ["contraband", "MALWARE"]


def test_a_rejected_token_is_a_401(recording_sandbox: Sandbox) -> None:
    client = Gradient(
        access_token="invalid", workspace_id="ws", base_url=recording_sandbox.gradient_base_url, max_retries=0
    )
    with client, pytest.raises(errors.AuthenticationError) as info:
        client.complete(MODEL, "Alice")
    assert info.value.status_code == 401


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({}, ["query"]),
        ({"query": ""}, ["query"]),
        ({"query": "a", "maxGeneratedTokenCount": 512}, ["maxGeneratedTokenCount"]),
        ({"query": "a", "maxGeneratedTokenCount": 0}, ["maxGeneratedTokenCount"]),
        ({"query": "a", "guidance": {"type": "choice", "value": []}}, ["guidance", "value"]),
        ({"query": "a", "guidance": {"type": "choice", "value": ["x" * 33]}}, ["guidance", "value", 0]),
        ({"query": "a", "rag": {"collectionId": ""}}, ["rag", "collectionId"]),
        ({"query": "a", "topK": 1.5}, ["topK"]),
    ],
)
def test_body_constraints_give_a_body_parsing_error(
    recording_sandbox: Sandbox, body: dict[str, Any], loc: list[Any]
) -> None:
    # Our client refuses these before sending, so the wire is driven directly here.
    r = httpx.post(
        f"{recording_sandbox.gradient_base_url}/models/{MODEL}/complete", json=body, headers=_HEADERS
    )
    assert (r.status_code, r.json()["type"]) == (400, "bodyParsingError")
    assert [issue["loc"] for issue in r.json()["payload"]["validationError"]] == [loc]


def test_a_missing_workspace_or_token_and_bad_json(recording_sandbox: Sandbox) -> None:
    url = f"{recording_sandbox.gradient_base_url}/models/{MODEL}/complete"
    missing_workspace = httpx.post(url, json={"query": "a"}, headers={"authorization": "Bearer t"})
    assert (missing_workspace.status_code, missing_workspace.json()["type"]) == (
        400,
        "queryOrPathParsingError",
    )
    no_token = httpx.post(url, json={"query": "a"}, headers={"x-gradient-workspace-id": "ws"})
    assert no_token.status_code == 401
    bad_json = httpx.post(url, content=b"{", headers=_HEADERS)
    assert (bad_json.status_code, bad_json.json()["type"]) == (400, "bodyParsingError")
    lone = httpx.post(url, content=rb'{"query": "bad \udc00"}', headers=_HEADERS)
    assert (lone.status_code, lone.json()["type"]) == (400, "bodyParsingError")
    empty_id = httpx.post(
        f"{recording_sandbox.gradient_base_url}/models//complete", json={"query": "a"}, headers=_HEADERS
    )
    assert (empty_id.status_code, empty_id.json()["type"]) == (400, "queryOrPathParsingError")


def test_the_sandbox_lists_its_models(recording_sandbox: Sandbox) -> None:
    models = httpx.get(f"{recording_sandbox.url}/_sandbox/models").json()
    assert {"id": MODEL, "guidance": True, "context": 1024} in models["gradient"]
    assert {"id": "llama2-7b-chat", "guidance": False, "context": 512} in models["gradient"]
    assert {"id": "llama-3-8b-instruct", "context": 2048} in models["scale"]


_HEADERS = {"authorization": "Bearer t", "x-gradient-workspace-id": "ws"}
