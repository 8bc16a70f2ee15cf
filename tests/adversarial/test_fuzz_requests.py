"""Property-based fuzzing of what the clients send: their argument checks against the specs' own schemas.

Keyword arguments are drawn from the spec's request schema (valid values), from anything at all
(junk of every type, NaN, infinities) and from names the spec doesn't have. Whatever is drawn, the
client must either send exactly the body the arguments describe, and that body must validate against
the spec (jsonschema), or refuse before sending anything: ``ValueError`` for a value the spec forbids,
``TypeError`` for an unknown name. It may never send a body the spec forbids, nor refuse one it allows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
from hypothesis import example, given
from hypothesis import strategies as st

from wrapper._generated.gradient.params import KEYWORDS as GRADIENT_KEYWORDS

from ._clients import GRADIENT_TOKEN, SCALE_KEY, WORKSPACE_ID, new_client
from ._schemas import JSON_VALUES, from_schema, fuzz_settings, schema, spec

EXAMPLES = 300
fuzz = fuzz_settings(EXAMPLES)

MODEL_IDS = st.text(min_size=1) | st.sampled_from([".", "..", "a/b", "../x", "%2E", "?", "#"])
JUNK = (
    JSON_VALUES
    | st.sampled_from([math.nan, math.inf, -math.inf, 1.0, 2**64, -1, b"bytes", ("a", "b"), {"a"}, "x" * 40])
    | st.floats()
)


def _validator(spec_name: str, name: str, cls: type[Any]) -> Any:
    """A validator for a component schema, whose ``integer`` is a Python int (``1.0`` is a float argument)."""
    checker = cls.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    )
    strict = jsonschema.validators.extend(cls, type_checker=checker)
    return strict({"$ref": f"#/components/schemas/{name}", "components": spec(spec_name)["components"]})


SCALE_BODY = _validator("scale.yaml", "CompletionRequestV2", jsonschema.Draft202012Validator)
GRADIENT_BODY = _validator("gradient.json", "CompleteModelBodyParams", jsonschema.Draft4Validator)

# Each keyword argument: the strategy for its valid values, and how it goes into the body.
Field = tuple[st.SearchStrategy[Any], Callable[[Any], tuple[str, Any]]]
_SCALE_PROPERTIES = schema("scale.yaml", "CompletionRequestV2")["properties"]
SCALE_ARGUMENTS: dict[str, Field] = {
    name: (from_schema(node, "scale.yaml"), lambda value, name=name: (name, value))
    for name, node in _SCALE_PROPERTIES.items()
    if name not in ("prompt", "stream")
}
_GRADIENT_PROPERTIES = schema("gradient.json", "CompleteModelBodyParams")["properties"]


def _gradient_field(wire: str, reshape: dict[str, Any] | None) -> Field:
    """A Gradient keyword: values from its body field's schema (or, reshaped, from the field it fills)."""
    node = _GRADIENT_PROPERTIES[wire]
    if reshape is None:
        return from_schema({**node, "nullable": False}, "gradient.json"), lambda value: (wire, value)
    into, constants = reshape["into"], reshape["constants"]
    return (
        from_schema(node["properties"][into], "gradient.json"),
        lambda value: (wire, {**constants, into: value}),
    )


# The keyword names and reshapes are the override table's (scripts/overrides.py), as regen emitted them.
GRADIENT_ARGUMENTS: dict[str, Field] = {
    name: _gradient_field(keyword["wire"], keyword["reshape"]) for name, keyword in GRADIENT_KEYWORDS.items()
}


def _arguments(fields: dict[str, Field]) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments: each one absent, None ("not given"), valid, or junk; sometimes an unknown one."""
    known = st.fixed_dictionaries(
        {}, optional={name: st.none() | valid | valid | JUNK for name, (valid, _) in fields.items()}
    )
    unknown = st.dictionaries(st.sampled_from(["stream", "prompt_tokens", "topK", "n"]), JUNK, max_size=1)
    return st.builds(lambda a, b: {**a, **b}, known, st.one_of(st.just({}), st.just({}), unknown))


def _body(base: dict[str, Any], fields: dict[str, Field], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The body the arguments describe, as JSON would carry it (a tuple is a list), or None if JSON can't."""
    body = dict(base)
    for name, value in kwargs.items():
        if value is not None:
            key, sent = fields[name][1](value)
            body[key] = sent
    try:
        carried: dict[str, Any] = json.loads(json.dumps(body, allow_nan=False))
    except (TypeError, ValueError):
        return None
    return carried


def _capture(requests: list[httpx.Request], success: dict[str, Any]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json=success)

    return httpx.Client(transport=httpx.MockTransport(handler))


def _outcome(call: Callable[[], Any], requests: list[httpx.Request]) -> str:
    try:
        call()
    except TypeError:
        assert requests == [], "refused, but only after sending"
        return "TypeError"
    except ValueError:
        assert requests == [], "refused, but only after sending"
        return "ValueError"
    assert len(requests) == 1
    return "sent"


APIS: dict[str, tuple[dict[str, Field], Any, str, str, dict[str, Any]]] = {
    "scale": (SCALE_ARGUMENTS, SCALE_BODY, "prompt", "https://scale", {"completions": [["p", ["ok"]]]}),
    "gradient": (
        GRADIENT_ARGUMENTS,
        GRADIENT_BODY,
        "query",
        "https://gradient/api",
        {"finishReason": "stop", "generatedOutput": "ok"},
    ),
}
"""Per API: its keyword arguments, its body's validator, the prompt's field, a base URL, a success body."""


def _sent(api: str, kwargs: dict[str, Any], prompt: str, model: str) -> httpx.Request | None:
    """The request ``complete`` sent, checked to carry exactly the body the arguments describe, which the
    spec allows; or None when the client refused them, checked to be refused before sending, for cause."""
    fields, validator, field, url, success = APIS[api]
    requests: list[httpx.Request] = []
    with new_client(api, url, max_retries=0, http_client=_capture(requests, success)) as client:
        outcome = _outcome(lambda: client.complete(model, prompt, **kwargs), requests)
    known = {name: value for name, value in kwargs.items() if name in fields}
    body = _body({field: prompt}, fields, known)
    # Scale's spec allows an empty prompt; the clients' issue asks that it be refused there too. A model id
    # "." or ".." can't be a path segment: URLs resolve it away, and the request would go to another path.
    forbidden = body is None or not validator.is_valid(body) or prompt == "" or model in (".", "..")
    if known != kwargs:  # an unknown name: TypeError, unless a bad value was checked first
        assert outcome == "TypeError" or (outcome == "ValueError" and forbidden), kwargs
        return None
    if forbidden:
        assert outcome == "ValueError", body
        return None
    assert outcome == "sent"
    assert json.loads(requests[0].content) == body
    return requests[0]


@fuzz
@given(kwargs=_arguments(SCALE_ARGUMENTS), prompt=st.text(), model=MODEL_IDS)
@example(kwargs={}, prompt="p", model="..")
def test_scale_sends_exactly_what_the_spec_allows(kwargs: dict[str, Any], prompt: str, model: str) -> None:
    request = _sent("scale", kwargs, prompt, model)
    if request is not None:
        assert request.url.raw_path.decode() == f"/v4/models/{quote(model, safe='')}/completions"
        assert request.headers["x-api-key"] == SCALE_KEY


@fuzz
@given(kwargs=_arguments(GRADIENT_ARGUMENTS), prompt=st.text(), model=MODEL_IDS)
@example(kwargs={}, prompt="p", model=".")
def test_gradient_sends_exactly_what_the_spec_allows(kwargs: dict[str, Any], prompt: str, model: str) -> None:
    request = _sent("gradient", kwargs, prompt, model)
    if request is not None:
        assert request.url.raw_path.decode() == f"/api/models/{quote(model, safe='')}/complete"
        assert request.headers["authorization"] == f"Bearer {GRADIENT_TOKEN}"
        assert request.headers["x-gradient-workspace-id"] == WORKSPACE_ID
