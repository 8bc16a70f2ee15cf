"""The generated low-level clients build the requests the specs describe and parse every response shape."""

import json
from collections.abc import Callable

import httpx
import pytest
from helpers import error_variants, sample, spec

from wrapper._generated.gradient import AuthenticatedClient
from wrapper._generated.gradient import models as gm
from wrapper._generated.gradient.api.models import complete_model
from wrapper._generated.scale import Client
from wrapper._generated.scale import models as sm
from wrapper._generated.scale.api.models import create_completion

Handler = Callable[[httpx.Request], httpx.Response]


def recorder(response: httpx.Response) -> tuple[list[httpx.Request], httpx.MockTransport]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return response

    return seen, httpx.MockTransport(handle)


def generated_gradient(transport: httpx.MockTransport) -> AuthenticatedClient:
    client = AuthenticatedClient(base_url="https://api.example/api", token="tok")
    return client.set_httpx_client(
        httpx.Client(
            base_url="https://api.example/api", transport=transport, headers={"Authorization": "Bearer tok"}
        )
    )


def generated_scale(transport: httpx.MockTransport) -> Client:
    client = Client(base_url="https://sgp.example")
    return client.set_httpx_client(httpx.Client(base_url="https://sgp.example", transport=transport))


def test_gradient_request_has_method_escaped_path_headers_and_camel_case_body() -> None:
    seen, transport = recorder(httpx.Response(200, json={"finishReason": "stop", "generatedOutput": "yes"}))
    body = gm.CompleteModelBodyParams(
        query="Is the sky blue?",
        max_generated_token_count=8,
        guidance=gm.CompleteModelBodyParamsGuidance(type_="choice", value=["yes", "no"]),
        rag=gm.CompleteModelBodyParamsRag(collection_id="docs"),
        top_k=5,
    )
    with generated_gradient(transport) as client:
        result = complete_model.sync(id="model/a b", client=client, body=body, x_gradient_workspace_id="ws-1")

    (request,) = seen
    assert request.method == "POST"
    assert request.url.raw_path == b"/api/models/model%2Fa%20b/complete"
    assert request.headers["x-gradient-workspace-id"] == "ws-1"
    assert request.headers["authorization"] == "Bearer tok"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "query": "Is the sky blue?",
        "maxGeneratedTokenCount": 8,
        "guidance": {"type": "choice", "value": ["yes", "no"]},
        "rag": {"collectionId": "docs"},
        "topK": 5,
    }  # only the fields given
    assert result == gm.CompleteModelSuccess(finish_reason="stop", generated_output="yes")


def test_scale_request_has_escaped_path_and_only_the_fields_given() -> None:
    seen, transport = recorder(httpx.Response(200, json={"completions": [["hi", ["there"]]]}))
    bindings = sm.ParameterBindings(bindings=sm.ParameterBindingsBindings.from_dict({"a": 1}))
    body = sm.CompletionRequestV2(
        prompt="hi", max_tokens=3, stop_sequences=["\n"], reasoning_effort="low",
        model_request_parameters=bindings,
    )  # fmt: skip
    with generated_scale(transport) as client:
        create_completion.sync("dep/1", client=client, body=body)

    (request,) = seen
    assert request.method == "POST"
    assert request.url.raw_path == b"/v4/models/dep%2F1/completions"
    assert json.loads(request.content) == {
        "prompt": "hi", "max_tokens": 3, "stop_sequences": ["\n"], "reasoning_effort": "low",
        "model_request_parameters": {"bindings": {"a": 1}},
    }  # fmt: skip


GRADIENT = spec("gradient")
GRADIENT_ERRORS = error_variants()


@pytest.mark.parametrize("kind", sorted(GRADIENT_ERRORS))
@pytest.mark.parametrize("status", [400, 404, 422])
def test_every_gradient_error_body_parses_into_its_own_model(kind: str, status: int) -> None:
    name, schema = GRADIENT_ERRORS[kind]
    body = {**sample(GRADIENT, schema), "type": kind, "message": "why"}
    _, transport = recorder(httpx.Response(status, json=body))
    with generated_gradient(transport) as client:
        response = complete_model.sync_detailed(
            id="m", client=client, body=gm.CompleteModelBodyParams(query="q"), x_gradient_workspace_id="ws"
        )
    assert response.status_code == status
    assert type(response.parsed).__name__ == name
    assert response.parsed.message == "why"
    assert response.parsed.type_ == kind


def test_flagged_content_samples_are_reachable() -> None:
    body = {
        "type": "flaggedContent",
        "message": "m",
        "payload": {"flaggedContent": [{"sample": "a"}, {"sample": "b"}]},
    }
    parsed = gm.FlaggedContentError.from_dict(body)
    assert [item.sample for item in parsed.payload.flagged_content] == ["a", "b"]


def test_scale_success_with_tuple_completions_choices_and_logprobs() -> None:
    body = {
        "finish_reason": "length", "prompt_tokens": 4, "response_tokens": 2,
        "completions": [["the prompt", ["first output", "second"]]],
        "choices": [{"index": 0, "logprobs": {"content": [{
            "token": "first", "logprob": -0.1, "bytes": [102],
            "top_logprobs": [{"token": "first", "logprob": -0.1}],
        }]}}],
    }  # fmt: skip
    parsed = sm.CompletionResponse.from_dict(body)
    prompt, outputs = parsed.completions[0]
    assert prompt == "the prompt"
    assert outputs == ["first output", "second"]
    assert (parsed.finish_reason, parsed.prompt_tokens, parsed.response_tokens) == ("length", 4, 2)
    token = parsed.choices[0].logprobs.content[0]
    assert (token.token, token.logprob, token.top_logprobs[0].token) == ("first", -0.1, "first")
    assert parsed.to_dict() == body


def test_scale_422_parses_into_validation_errors() -> None:
    detail = [
        {"loc": ["body", "temperature"], "msg": "too high", "type": "less_than_equal", "ctx": {"le": 2}}
    ]
    _, transport = recorder(httpx.Response(422, json={"detail": detail}))
    with generated_scale(transport) as client:
        parsed = create_completion.sync("d", client=client, body=sm.CompletionRequestV2(prompt="p"))
    assert isinstance(parsed, sm.HTTPValidationError)
    assert [(e.loc, e.msg, e.type_) for e in parsed.detail] == [
        (["body", "temperature"], "too high", "less_than_equal")
    ]
