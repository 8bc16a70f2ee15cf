"""Schemathesis against the sandbox: requests generated from ``specs/`` (valid and invalid), answers checked.

The sandbox must never answer 5xx, must reject what the spec forbids and accept what it allows, and
every answer must conform to the spec. Two things the specs leave out are checked by hand: a Scale
request with ``"stream": true`` is answered with server-sent events (each event a ``CompletionResponse``;
seeds/README.md), and schema-valid requests may still be refused for their meaning (Scale: 422 when prompt
plus ``max_tokens`` exceed the context length, as its description says, or for a negative token count,
which its spec leaves unbounded and its service refuses; Gradient: the 4XX types about
unknown models, flagged content, guidance or RAG), so Schemathesis' "positive data accepted" check
is replaced by one that allows exactly those. The sandbox takes any credentials but refuses none
(Schemathesis' "ignored auth" check expects a made-up token refused), so that check is replaced by
one that sends none.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from wrapper.sandbox import Sandbox
from wrapper.sandbox._catalog import FAIL_TRIGGER
from wrapper.sandbox._registry import registry

from ._clients import GRADIENT_TOKEN, SCALE_KEY
from ._schemas import SPECS, spec

MAX_EXAMPLES = 150
"""Per API operation and generation mode (positive, negative)."""
SCALE_MODELS = ["llama-3-8b-instruct", "mistral-7b-instruct"]
GRADIENT_MODELS = ["nous-hermes2", "llama2-7b-chat", "alice-adapter_model_adapter"]
CONTEXT_ERROR = "exceed the context length"

seen: Counter[tuple[str, str, int]] = Counter()
"""(api, generation mode, status) of every case, for the summary test at the end."""


def _load(name: str) -> schemathesis.BaseSchema:
    loaded = schemathesis.openapi.from_path(SPECS / name)
    loaded.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        max_examples=MAX_EXAMPLES,
        with_security_parameters=False,
    )
    if os.environ.get("CI"):  # repeatable under CI, as the hypothesis properties are (see _schemas.py)
        loaded.config.seed = 0
    return loaded


scale_schema = _load("scale.yaml")
gradient_schema = _load("gradient.json")
_EVENT = jsonschema.Draft202012Validator(
    {"$ref": "#/components/schemas/CompletionResponse", "components": spec("scale.yaml")["components"]}
)


def _mode(case: schemathesis.Case) -> str:
    return case.meta.generation.mode.value if case.meta else "explicit"


def _check_stream(response: schemathesis.Response) -> None:
    """A 200 stream: ``text/event-stream`` whose every data event is a ``CompletionResponse`` or an error."""
    assert response.headers["content-type"][0].startswith("text/event-stream")
    events = [block for block in response.text.split("\n\n") if block.strip()]
    assert events, "an empty stream"
    for block in events:
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        if fields.get("event") == "error":  # an error body (seeds/README.md), e.g. for a "__fail__" prompt
            assert isinstance(json.loads(fields["data"]), dict), block
        else:
            assert "event" not in fields, block
            _EVENT.validate(json.loads(fields["data"]))


def _rejects_valid_data(api: str, response: schemathesis.Response) -> bool:
    """True when the sandbox turned a schema-valid request away for breaking the schema.

    Scale may answer 422 only for the context length and for negative token counts (its handler's
    ``counts``); Gradient may answer any 4XX whose ``type`` is about meaning (unknown model, flagged
    content, guidance or RAG problems), never a parsing error.
    """
    if response.status_code < 400:
        return False
    body = response.json()
    if api == "scale":
        detail = body.get("detail") if response.status_code == 422 else None
        return not (isinstance(detail, list) and detail and all(map(_refused_for_meaning, detail)))
    return body.get("type") in ("bodyParsingError", "queryOrPathParsingError")


def _refused_for_meaning(item: dict[str, Any]) -> bool:
    """Whether a Scale 422 item is one the service sends for a schema-valid body."""
    if item["loc"] == ["body", "max_tokens"] and CONTEXT_ERROR in item["msg"]:
        return True
    counts = [["body", count] for count in registry()["scale"].operation.counts]
    return item["loc"] in counts and item["type"] == "greater_than_equal" and item["input"] < 0


@scale_schema.parametrize()
def test_scale(case: schemathesis.Case, shared_sandbox: Sandbox) -> None:
    case.path_parameters = {"model_deployment_id": SCALE_MODELS[len(seen) % 2]}
    headers = {"x-api-key": SCALE_KEY}
    response = case.call(base_url=shared_sandbox.scale_base_url, headers=headers)
    seen["scale", _mode(case), response.status_code] += 1
    streamed = isinstance(case.body, dict) and case.body.get("stream") is True
    prompt = case.body.get("prompt") if isinstance(case.body, dict) else None
    if isinstance(prompt, str) and FAIL_TRIGGER in prompt:  # the documented failure: 500 or an error event
        assert response.status_code in (200, 422, 500), response.text
        if streamed and response.status_code == 200:
            _check_stream(response)
        return
    assert response.status_code < 500, response.text
    if _mode(case) == "positive":
        assert not _rejects_valid_data("scale", response), response.text
    if streamed and response.status_code == 200:
        _check_stream(response)
    else:
        case.validate_response(
            response, headers=headers, excluded_checks=[positive_data_acceptance, ignored_auth]
        )


@gradient_schema.parametrize()
def test_gradient(case: schemathesis.Case, shared_sandbox: Sandbox) -> None:
    if _mode(case) == "positive":
        case.path_parameters = {"id": GRADIENT_MODELS[len(seen) % 3]}
    headers = {"Authorization": f"Bearer {GRADIENT_TOKEN}"}
    response = case.call(base_url=shared_sandbox.gradient_base_url, headers=headers)
    seen["gradient", _mode(case), response.status_code] += 1
    assert response.status_code < 500, response.text
    if _mode(case) == "positive":
        assert not _rejects_valid_data("gradient", response), response.text
    case.validate_response(
        response, headers=headers, excluded_checks=[positive_data_acceptance, ignored_auth]
    )


def test_every_api_and_mode_was_exercised() -> None:
    """Runs after the two above (pytest keeps file order): both APIs saw valid and invalid requests."""
    totals: dict[tuple[str, str], int] = Counter()
    for (api, mode, _), count in seen.items():
        totals[api, mode] += count
    print(f"schemathesis cases: {sum(seen.values())} {dict(sorted(seen.items()))}")
    for api in ("scale", "gradient"):
        for mode in ("positive", "negative"):
            assert totals[api, mode] >= 20, (api, mode, totals)


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_requests_without_credentials_are_refused(shared_sandbox: Sandbox, api: str) -> None:
    """The sandbox takes any credentials but insists on some: 401 in each API's error shape."""
    with httpx.Client() as http:
        if api == "scale":
            response = http.post(
                f"{shared_sandbox.scale_base_url}/v4/models/{SCALE_MODELS[0]}/completions",
                json={"prompt": "hi"},
            )
        else:
            response = http.post(
                f"{shared_sandbox.gradient_base_url}/models/{GRADIENT_MODELS[0]}/complete",
                json={"query": "hi"},
                headers={"x-gradient-workspace-id": "ws"},
            )
    assert response.status_code == 401
    assert set(response.json()) == ({"detail"} if api == "scale" else {"type", "message"})


@pytest.mark.parametrize("api", ["scale", "gradient"])
@pytest.mark.parametrize("model", ["a\nb", "nous-hermes2\n", "\n", "a\r\nb"])
def test_any_model_id_gets_an_answer_in_the_api_error_shape(
    shared_sandbox: Sandbox, api: str, model: str
) -> None:
    """Found by Schemathesis: an id with a line break must not fall through to a plain-text "Not Found"."""
    with httpx.Client() as http:
        if api == "scale":
            response = http.post(
                f"{shared_sandbox.scale_base_url}/v4/models/{quote(model, safe='')}/completions",
                json={"prompt": "hi"},
                headers={"x-api-key": SCALE_KEY},
            )
        else:
            response = http.post(
                f"{shared_sandbox.gradient_base_url}/models/{quote(model, safe='')}/complete",
                json={"query": "hi"},
                headers={"Authorization": f"Bearer {GRADIENT_TOKEN}", "x-gradient-workspace-id": "ws"},
            )
    assert response.status_code in (400, 404)
    body = response.json()
    assert (
        "detail" in body
        if api == "scale"
        else body["type"] in ("unknownBaseModel", "queryOrPathParsingError")
    )
