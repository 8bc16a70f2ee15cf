"""Contract tests: our clients' requests against Stoplight Prism, which validates them against ``specs/``.

Prism answers every request; when the request breaks the spec it says so in an ``sl-violations``
header (entries located under ``request``) and answers 4XX. It answers with examples built from the
spec's schemas, which our clients must parse, and ``Prefer: code=N`` / ``dynamic=true`` make it send
the error examples and schema-generated variants.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from wrapper import Completion
from wrapper.errors import (
    APIResponseValidationError,
    APIStatusError,
    ContentFlaggedError,
    UnprocessableEntityError,
)

from ._clients import new_client
from ._expect import is_gradient_error
from ._tap import Tap

SCALE_FIELDS: dict[str, list[Any]] = {
    "model_request_parameters": [{"bindings": {}}, {"bindings": {"s": "x", "i": 1, "f": 1.5, "b": True}}],
    "temperature": [0.0, 0.2, 2.0],
    "stop_sequences": [[], ["\n"], ["a", "b", "c", "d"]],
    "max_tokens": [1, 2**31],
    "top_p": [0.0, 1.0],
    "top_k": [0, 1, 50.5],
    "frequency_penalty": [-2.0, 2.0],
    "presence_penalty": [-2.0, 2.0],
    "logprobs": [True, False],
    "top_logprobs": [0, 20],
    "chat_template": ["", "{{ prompt }}"],
    "chat_template_kwargs": [{}, {"nested": [1, {"x": None}], "flag": True}],
    "reasoning_effort": ["low", "medium", "high"],
}
SCALE_INVALID: list[tuple[str, Any]] = [
    ("temperature", -0.01),
    ("temperature", 2.01),
    ("temperature", float("nan")),
    ("stop_sequences", ["a", "b", "c", "d", "e"]),
    ("stop_sequences", "\n"),
    ("reasoning_effort", "extreme"),
    ("max_tokens", 1.5),
    ("logprobs", "yes"),
]
GRADIENT_FIELDS: dict[str, list[Any]] = {
    "max_generated_token_count": [1, 511],
    "temperature": [0.0, 1.5],
    "top_k": [0, 1, 100],
    "top_p": [0.0, 1.0],
    "auto_template": [True, False],
    "guidance": [["y"], [f"{i:x<32}" for i in range(10)]],
    "rag_collection": ["c", "wonderland"],
}
GRADIENT_INVALID: list[tuple[str, Any]] = [
    ("max_generated_token_count", 0),
    ("max_generated_token_count", 512),
    ("guidance", []),
    ("guidance", [str(i) for i in range(11)]),
    ("guidance", [""]),
    ("guidance", ["x" * 33]),
    ("rag_collection", ""),
    ("top_k", 1.5),
]
PROMPTS = ["x", "Ünïcödé \U0001f600 \u202e\x00 text", "long " * 2000]
PROMPT_IDS = ["one", "unicode", "long"]


def _alone(fields: dict[str, list[Any]]) -> Iterator[Any]:
    for name, values in fields.items():
        for value in values:
            yield pytest.param({name: value}, id=f"{name}={value!r:.30}")
    yield pytest.param({name: values[0] for name, values in fields.items()}, id="all-first")
    yield pytest.param({name: values[-1] for name, values in fields.items()}, id="all-last")


def request_violations(tap: Tap) -> list[Any]:
    """Prism's complaints about the requests sent through ``tap`` (empty when all of them met the spec)."""
    found = []
    for exchange in tap.exchanges:
        assert exchange.status is not None, f"no answer to {exchange.request.url}"
        violations = json.loads(exchange.headers.get("sl-violations", "[]"))
        found += [v for v in violations if v["location"][0] == "request"]
    return found


def response_violations(tap: Tap) -> list[str]:
    """The codes of Prism's complaints about its own answers (examples it builds can break the spec)."""
    return [
        v["code"]
        for exchange in tap.exchanges
        for v in json.loads(exchange.headers.get("sl-violations", "[]"))
        if v["location"][0] == "response"
    ]


def tapped(api: str, url: str, prefer: str | None = None) -> tuple[Any, Tap]:
    """A sync client of ``api`` (no retries) whose exchanges ``Tap`` records, with ``Prefer`` if given."""
    tap = Tap(httpx.HTTPTransport(), {"Prefer": prefer} if prefer else None)
    return new_client(api, url, max_retries=0, http_client=httpx.Client(transport=tap)), tap


# -- Scale ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", list(_alone(SCALE_FIELDS)))
def test_scale_requests_meet_the_spec(prism_scale: str, params: dict[str, Any]) -> None:
    """Prism's static 200 example has ``completions: [[]]``, which the spec forbids (a pair has exactly two
    items): Prism flags its own answer, and our client refuses it with ``APIResponseValidationError``
    rather than inventing a completion that the response does not contain."""
    client, tap = tapped("scale", prism_scale)
    with client, pytest.raises(APIResponseValidationError) as caught:
        client.complete("deployment-1", "What is the capital of France?", **params)
    assert request_violations(tap) == []
    assert response_violations(tap) == ["minItems"]
    assert json.loads(caught.value.text)["completions"] == [[]]
    sent = json.loads(tap.exchanges[0].request.content)
    assert sent == {"prompt": "What is the capital of France?", **params}


@pytest.mark.parametrize("prompt", PROMPTS, ids=PROMPT_IDS)
def test_scale_prompts_and_ids_meet_the_spec(prism_scale: str, prompt: str) -> None:
    client, tap = tapped("scale", prism_scale)
    with client:
        for deployment in ("d", "with space/and?query#frag", "ünï"):
            with pytest.raises(APIResponseValidationError):
                client.complete(deployment, prompt)
    assert request_violations(tap) == []
    assert [e.status for e in tap.exchanges] == [200, 200, 200]


def test_scale_stream_request_meets_the_spec(prism_scale: str) -> None:
    """The spec documents no event stream: asked for one (``Accept: text/event-stream``), Prism says 406."""
    client, tap = tapped("scale", prism_scale)
    with client, pytest.raises(APIStatusError) as caught:
        list(client.stream("deployment-1", "Tell me a story", max_tokens=8, temperature=0.0))
    assert caught.value.status_code == 406
    assert request_violations(tap) == []
    assert json.loads(tap.exchanges[0].request.content)["stream"] is True


def test_scale_422_example_maps_to_unprocessable_entity(prism_scale: str) -> None:
    client, tap = tapped("scale", prism_scale, prefer="code=422")
    with client, pytest.raises(UnprocessableEntityError) as caught:
        client.complete("deployment-1", "hi", max_tokens=4)
    assert request_violations(tap) == []
    assert caught.value.status_code == 422
    assert caught.value.errors == [(("string",), "string", "string")]


@pytest.mark.parametrize(("name", "value"), SCALE_INVALID, ids=[f"{n}={v!r:.20}" for n, v in SCALE_INVALID])
def test_scale_out_of_spec_arguments_never_reach_the_wire(prism_scale: str, name: str, value: Any) -> None:
    client, tap = tapped("scale", prism_scale)
    with client, pytest.raises(ValueError, match=name):
        client.complete("deployment-1", "hi", **{name: value})
    assert tap.exchanges == []


# -- Gradient ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("params", list(_alone(GRADIENT_FIELDS)))
def test_gradient_requests_meet_the_spec(prism_gradient: str, params: dict[str, Any]) -> None:
    client, tap = tapped("gradient", prism_gradient)
    with client:
        result = client.complete("model-1", "Is the sky blue?", **params)
    assert request_violations(tap) == []
    assert response_violations(tap) == []
    assert result == Completion("string", "string", None, None, None, result.raw)


@pytest.mark.parametrize("query", PROMPTS, ids=PROMPT_IDS)
def test_gradient_queries_and_ids_meet_the_spec(prism_gradient: str, query: str) -> None:
    client, tap = tapped("gradient", prism_gradient)
    with client:
        for model in ("m", "with space/and?query#frag", "ünï"):
            assert client.complete(model, query).text == "string"
    assert request_violations(tap) == []


def test_gradient_stream_request_meets_the_spec(prism_gradient: str) -> None:
    client, tap = tapped("gradient", prism_gradient)
    with client:
        chunks = list(client.stream("model-1", "Is the sky blue?", max_generated_token_count=8))
    assert request_violations(tap) == []
    assert "".join(chunk.text for chunk in chunks) == "string"
    assert chunks[-1].finish_reason == "string"


@pytest.mark.parametrize("status", [400, 401, 404, 422, 429])
def test_gradient_error_example_maps_to_its_class(prism_gradient: str, status: int) -> None:
    """Prism's 4XX example is a ``flaggedContent`` body, whatever the status asked for."""
    client, tap = tapped("gradient", prism_gradient, prefer=f"code={status}")
    with client, pytest.raises(APIStatusError) as caught:
        client.complete("model-1", "hi")
    assert request_violations(tap) == []
    assert is_gradient_error(caught.value, status, "flaggedContent")
    assert caught.value.status_code == status
    if isinstance(caught.value, ContentFlaggedError):
        assert caught.value.samples == ["string"]


def test_gradient_dynamic_error_examples_map_by_type(prism_gradient: str) -> None:
    """Prism's schema-generated 4XX bodies (random variants, with extra properties) map by their ``type``."""
    client, tap = tapped("gradient", prism_gradient, prefer="code=400, dynamic=true")
    seen = set()
    with client:
        for _ in range(30):
            with pytest.raises(APIStatusError) as caught:
                client.complete("model-1", "hi")
            kind = caught.value.body.get("type")  # None for a variant without a tag, if the spec has one
            assert caught.value.status_code == 400
            assert is_gradient_error(caught.value, 400, kind)
            assert getattr(caught.value, "type", None) == kind
            seen.add(kind)
    assert request_violations(tap) == []
    assert len(seen) > 1


def test_gradient_dynamic_success_examples_parse(prism_gradient: str) -> None:
    client, tap = tapped("gradient", prism_gradient, prefer="dynamic=true")
    with client:
        for _ in range(10):
            result = client.complete("model-1", "hi", temperature=0.5)
            assert result.text == result.raw.generated_output
    assert request_violations(tap) == []


@pytest.mark.parametrize(
    ("name", "value"), GRADIENT_INVALID, ids=[f"{n}={v!r:.20}" for n, v in GRADIENT_INVALID]
)
def test_gradient_out_of_spec_arguments_never_reach_the_wire(
    prism_gradient: str, name: str, value: Any
) -> None:
    client, tap = tapped("gradient", prism_gradient)
    with client, pytest.raises(ValueError, match=name):
        client.complete("model-1", "hi", **{name: value})
    assert tap.exchanges == []


@pytest.mark.parametrize("api", ["scale", "gradient"])
@pytest.mark.parametrize(("model", "prompt"), [("", "hi"), ("model-1", "")])
def test_empty_model_or_prompt_never_reach_the_wire(
    prism_scale: str, prism_gradient: str, api: str, model: str, prompt: str
) -> None:
    """Gradient's spec requires both (minLength 1). Scale's allows an empty prompt, which our client refuses
    as the clients' issue asks; an empty deployment id would make the path ``/v4/models//completions``."""
    client, tap = tapped("scale", prism_scale) if api == "scale" else tapped("gradient", prism_gradient)
    with client, pytest.raises(ValueError, match="must not be empty"):
        client.complete(model, prompt)
    assert tap.exchanges == []


@pytest.mark.parametrize(
    ("api", "path", "body", "headers"),
    [
        ("scale", "/v4/models/d/completions", {"prompt": "x", "temperature": 3, "stream": "yes"}, {}),
        (
            "gradient",
            "/models/m/complete",
            {"query": "x", "maxGeneratedTokenCount": 512},
            {"x-gradient-workspace-id": ""},
        ),
    ],
)
def test_prism_reports_requests_that_break_the_spec(
    prism_scale: str, prism_gradient: str, api: str, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """The check the tests above rely on is not vacuous: Prism flags a request that breaks the spec."""
    tap = Tap(httpx.HTTPTransport())
    with httpx.Client(transport=tap, base_url=prism_scale if api == "scale" else prism_gradient) as http:
        http.post(path, json=body, headers={"Authorization": "Bearer t", **headers})
    assert len(request_violations(tap)) >= 2


async def test_async_clients_send_what_the_specs_allow(prism_scale: str, prism_gradient: str) -> None:
    """The async clients build the same requests (seen on httpx's async transport, tapped)."""
    scale_tap, gradient_tap = Tap(httpx.AsyncHTTPTransport()), Tap(httpx.AsyncHTTPTransport())
    scale, gradient = (
        new_client(api, url, asynchronous=True, max_retries=0, http_client=httpx.AsyncClient(transport=tap))
        for api, url, tap in (("scale", prism_scale, scale_tap), ("gradient", prism_gradient, gradient_tap))
    )
    async with scale, gradient:
        scale_all = {name: values[-1] for name, values in SCALE_FIELDS.items()}
        with pytest.raises(APIResponseValidationError):
            await scale.complete("deployment-1", "hi", **scale_all)
        gradient_all = {name: values[-1] for name, values in GRADIENT_FIELDS.items()}
        assert (await gradient.complete("model-1", "hi", **gradient_all)).text == "string"
        assert [c.text async for c in gradient.stream("model-1", "hi")] == ["string"]
    assert request_violations(scale_tap) == request_violations(gradient_tap) == []
    assert len(scale_tap.exchanges) + len(gradient_tap.exchanges) == 3
