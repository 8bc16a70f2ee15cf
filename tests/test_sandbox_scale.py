"""The sandbox's Scale GP API, driven through ``wrapper.scale``: every parameter has its observable effect."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import time

import httpx
import pytest
from sandbox_fixtures import _no_faults_left, recording_sandbox, scale  # noqa: F401

from wrapper.errors import APIError, InternalServerError, NotFoundError, UnprocessableEntityError
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

MODEL = "llama-3-8b-instruct"
PROMPT = "The White Rabbit"


def test_temperature_zero_gives_the_same_text_every_time(scale: Scale) -> None:
    texts = {scale.complete(MODEL, PROMPT, max_tokens=20, temperature=0.0).text for _ in range(3)}
    assert len(texts) == 1
    assert texts.pop().strip()


def test_higher_temperature_samples_different_texts(scale: Scale) -> None:
    texts = {scale.complete(MODEL, PROMPT, max_tokens=12, temperature=1.5).text for _ in range(8)}
    assert len(texts) > 1


def test_top_k_1_and_a_tiny_top_p_are_greedy_whatever_the_temperature(scale: Scale) -> None:
    greedy = scale.complete(MODEL, PROMPT, max_tokens=15, temperature=0.0).text
    assert scale.complete(MODEL, PROMPT, max_tokens=15, temperature=1.5, top_k=1).text == greedy
    assert scale.complete(MODEL, PROMPT, max_tokens=15, temperature=1.5, top_p=1e-9).text == greedy


def test_the_seed_makes_sampling_reproducible() -> None:
    def sampled(seed: int) -> list[str]:
        with (
            Sandbox(seed=seed) as sb,
            Scale(api_key="k", account_id="a", base_url=sb.scale_base_url) as client,
        ):
            return [client.complete(MODEL, PROMPT, max_tokens=10, temperature=1.2).text for _ in range(4)]

    assert sampled(7) == sampled(7)
    assert sampled(7) != sampled(8)


@pytest.mark.parametrize("max_tokens", [1, 3, 8])
def test_max_tokens_bounds_the_response_tokens(scale: Scale, max_tokens: int) -> None:
    r = scale.complete(MODEL, "Alice", max_tokens=max_tokens, temperature=1.0)
    assert r.response_tokens is not None
    assert 0 < r.response_tokens <= max_tokens
    assert r.prompt_tokens == 1
    assert r.finish_reason in ("length", "stop")


def test_finish_reason_is_length_when_cut_and_stop_at_the_end_of_a_paragraph(scale: Scale) -> None:
    full = scale.complete(MODEL, "Alice was beginning to", max_tokens=200, temperature=0.0)
    assert full.finish_reason == "stop"
    assert full.response_tokens is not None
    assert full.response_tokens < 200
    cut = scale.complete(
        MODEL, "Alice was beginning to", max_tokens=full.response_tokens - 1, temperature=0.0
    )
    assert cut.finish_reason == "length"
    assert full.text.startswith(cut.text)


def test_stop_sequences_never_appear_in_the_output(scale: Scale) -> None:
    full = scale.complete(MODEL, PROMPT, max_tokens=60, temperature=0.0).text
    stop = full.split()[3]  # a word the unstopped text contains
    stopped = scale.complete(MODEL, PROMPT, max_tokens=60, temperature=0.0, stop_sequences=[stop, "zzz"])
    assert stop not in stopped.text
    assert stopped.finish_reason == "stop"
    assert full.startswith(stopped.text)
    chunks = scale.stream(MODEL, PROMPT, max_tokens=60, temperature=0.0, stop_sequences=[stop, "zzz"])
    assert "".join(chunk.text for chunk in chunks) == stopped.text  # a stream never sends part of one
    for _ in range(10):
        sampled = scale.complete(MODEL, "Alice", max_tokens=40, temperature=1.0, stop_sequences=[",", " the"])
        assert "," not in sampled.text
        assert " the" not in sampled.text


def test_logprobs_are_real_probabilities_and_top_logprobs_are_sorted(scale: Scale) -> None:
    r = scale.complete(MODEL, PROMPT, max_tokens=12, temperature=1.0, logprobs=True, top_logprobs=3)
    assert r.logprobs is not None
    assert len(r.logprobs) == r.response_tokens
    assert "".join(t.token for t in r.logprobs) == r.text
    for entry in r.logprobs:
        assert entry.logprob <= 0.0
        top = [lp for _, lp in entry.top_logprobs]
        assert 1 <= len(top) <= 3
        assert top == sorted(top, reverse=True)
        assert all(lp <= 0.0 for lp in top)
        assert entry.logprob <= top[0]
    assert scale.complete(MODEL, PROMPT, max_tokens=3).logprobs is None


def test_a_stream_delivers_one_chunk_per_token_then_the_finish_reason(scale: Scale) -> None:
    expected = scale.complete(MODEL, PROMPT, max_tokens=12, temperature=0.0)
    chunks = list(scale.stream(MODEL, PROMPT, max_tokens=12, temperature=0.0))
    assert "".join(c.text for c in chunks) == expected.text
    assert len(chunks) == expected.response_tokens + 1  # and the last one, with the counts
    last = chunks[-1]
    assert (last.finish_reason, last.prompt_tokens, last.response_tokens) == (
        expected.finish_reason,
        expected.prompt_tokens,
        expected.response_tokens,
    )
    assert all(c.finish_reason is None for c in chunks[:-1])


@pytest.mark.serial  # wall-clock time between chunks
def test_a_stream_delivers_its_first_chunk_before_the_last_is_generated(
    recording_sandbox: Sandbox, scale: Scale
) -> None:
    recording_sandbox.inject(pace=0.15, api="scale")  # each token takes 0.15 s
    start = time.monotonic()
    stream = iter(scale.stream(MODEL, PROMPT, max_tokens=6, temperature=0.0))
    next(stream)
    first = time.monotonic() - start
    assert recording_sandbox.stats().in_flight == 1  # the server is still generating
    rest = list(stream)
    assert rest[-1].finish_reason is not None
    assert time.monotonic() - start - first >= 0.6


def test_a_failure_mid_stream_arrives_as_an_error_event(scale: Scale) -> None:
    received = []
    with pytest.raises(APIError):  # noqa: PT012 (the chunks before the error arrive first)
        for chunk in scale.stream(MODEL, "Alice __fail__", max_tokens=20):
            received.append(chunk)
    assert len(received) == 2


def test_generation_failure_unknown_deployment_and_context_overflow(scale: Scale) -> None:
    with pytest.raises(InternalServerError):
        scale.complete(MODEL, "Alice __fail__")
    with pytest.raises(NotFoundError):
        scale.complete("no-such-deployment", PROMPT)
    with pytest.raises(UnprocessableEntityError) as info:
        scale.complete("mistral-7b-instruct", "Alice " * 500, max_tokens=100)
    assert [(loc, kind) for loc, _, kind in info.value.errors] == [(("body", "max_tokens"), "value_error")]


@pytest.mark.parametrize(
    ("body", "loc", "kind"),
    [
        ({}, ["body", "prompt"], "missing"),
        ({"prompt": 3}, ["body", "prompt"], "string_type"),
        ({"prompt": "a", "temperature": 2.5}, ["body", "temperature"], "less_than_equal"),
        ({"prompt": "a", "temperature": -1}, ["body", "temperature"], "greater_than_equal"),
        (
            {"prompt": "a", "stop_sequences": ["a", "b", "c", "d", "e"]},
            ["body", "stop_sequences"],
            "too_long",
        ),
        ({"prompt": "a", "stream": "yes"}, ["body", "stream"], "bool_type"),
        ({"prompt": "a", "reasoning_effort": "max"}, ["body", "reasoning_effort"], "literal_error"),
        (
            {"prompt": "a", "model_request_parameters": {}},
            ["body", "model_request_parameters", "bindings"],
            "missing",
        ),
        ({"prompt": "a", "seed": 1}, ["body", "seed"], "extra_forbidden"),
    ],
)
def test_the_spec_constraints_are_enforced_with_a_422(
    recording_sandbox: Sandbox, body: dict[str, object], loc: list[object], kind: str
) -> None:
    # Our client refuses these before sending, so the wire is driven directly here.
    url = f"{recording_sandbox.scale_base_url}/v4/models/{MODEL}/completions"
    r = httpx.post(url, json=body, headers={"x-api-key": "k"})
    assert r.status_code == 422
    assert [(e["loc"], e["type"]) for e in r.json()["detail"]] == [(loc, kind)]


def test_bad_json_is_a_422_and_a_missing_api_key_a_401(recording_sandbox: Sandbox) -> None:
    url = f"{recording_sandbox.scale_base_url}/v4/models/{MODEL}/completions"
    r = httpx.post(url, content=b"{not json", headers={"x-api-key": "k"})
    assert (r.status_code, r.json()["detail"][0]["type"]) == (422, "json_invalid")
    lone = httpx.post(url, content=rb'{"prompt": "bad \ud800"}', headers={"x-api-key": "k"})
    assert (lone.status_code, lone.json()["detail"][0]["type"]) == (422, "json_invalid")
    assert "lone surrogate" in lone.json()["detail"][0]["ctx"]["error"]
    paired = httpx.post(
        url, content=rb'{"prompt": "ok \ud83d\ude00", "max_tokens": 2}', headers={"x-api-key": "k"}
    )
    assert paired.status_code == 200
    assert httpx.post(url, json={"prompt": "a"}).status_code == 401


def test_every_answer_carries_its_own_request_id(scale: Scale) -> None:
    first, second = (scale.complete(MODEL, PROMPT, max_tokens=2) for _ in range(2))
    *_, last_chunk = scale.stream(MODEL, PROMPT, max_tokens=2)
    with pytest.raises(NotFoundError) as error:
        scale.complete("no-such-model", PROMPT)
    ids = [first.request_id, second.request_id, last_chunk.request_id, error.value.request_id]
    assert all(isinstance(i, str) and i.startswith("sandbox-") for i in ids), ids
    assert len(set(ids)) == 4
