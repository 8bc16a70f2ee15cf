"""Arguments the specs forbid raise ValueError before anything is sent; the bounds are read from the specs.

Each request-body property of both specs yields values just inside and just outside each bound it
states (minimum/maximum, exclusive or not, lengths, item counts, enums) and values of the wrong
type. A spec change that moves a bound, adds an enum value or a field makes these tests fail until
the clients follow.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

import httpx
import pytest
from helpers import (
    GRADIENT_BODY,
    NO_SUCH_NAME,
    body_schema,
    call,
    keyword_schemas,
    non_null,
    operation,
    scale_body,
    spec,
)

from wrapper.gradient import Gradient, GradientParams
from wrapper.scale import ScaleParams

GRADIENT_SPEC = spec("gradient")
GRADIENT_OPERATION = operation(GRADIENT_SPEC, "gradient")
SCALE_SPEC = spec("scale")
GRADIENT_PARAMETERS = {name: schema for name, (_, schema) in keyword_schemas("gradient").items()}
SCALE_PARAMETERS = {name: schema for name, (_, schema) in keyword_schemas("scale").items()}


def _limits(schema: dict[str, Any], side: str) -> tuple[float | None, bool]:
    """A numeric bound and whether it is exclusive, in either OpenAPI 3.0 or 3.1 spelling."""
    plain = schema.get("minimum" if side == "low" else "maximum")
    exclusive = schema.get("exclusiveMinimum" if side == "low" else "exclusiveMaximum")
    if isinstance(exclusive, int | float) and not isinstance(exclusive, bool):  # 3.1
        return exclusive, True
    return plain, bool(exclusive)


def numeric_cases(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    step = 1 if schema["type"] == "integer" else 0.01
    cases: list[tuple[Any, bool]] = []
    for side, sign in (("low", 1), ("high", -1)):
        bound, exclusive = _limits(schema, side)
        if bound is not None:
            inside = bound + sign * step if exclusive else bound
            outside = bound if exclusive else bound - sign * step
            cases += [(inside, True), (outside, False)]
    if not cases:
        cases = [(1, True), (-1, True)]
    wrong = ["1", True, None if schema["type"] == "number" else 1.5, float("nan")]
    return cases + [(value, False) for value in wrong if value is not None]


def string_cases(schema: dict[str, Any], make: Any = lambda n: "x" * n) -> list[tuple[Any, bool]]:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    cases = [(make(max(low, 1)), True), (make(low), True), (7, False)]
    if low > 0:
        cases.append((make(low - 1), False))
    if high is not None:
        cases += [(make(high), True), (make(high + 1), False)]
    if "enum" in schema:
        wrong: list[Any] = ["not-" + schema["enum"][0], 1, [], {}]  # unhashable ones too
        cases = [(value, True) for value in schema["enum"]] + [(value, False) for value in wrong]
    return cases


def array_cases(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    item = schema["items"]
    cases = [(["a"] * max(low, 1), True), (["a"] * low, True), ("a", False), ([1], False), (5, False)]
    if low > 0:
        cases.append((["a"] * (low - 1), False))
    if high is not None:
        cases += [(["a"] * high, True), (["a"] * (high + 1), False)]
    cases += [([value], ok) for value, ok in string_cases(item) if isinstance(value, str)]
    return cases


def object_cases(schema: dict[str, Any], doc: dict[str, Any]) -> list[tuple[Any, bool]]:
    properties = schema.get("properties")
    if properties:  # an object of named fields: required ones present, known keys only, each one checked
        required = schema.get("required", [])
        valid = {key: first_valid(non_null(doc, properties[key]), doc) for key in properties}
        cases: list[tuple[Any, bool]] = [(valid, True), ("a=b", False)]
        cases += [({k: v for k, v in valid.items() if k != key}, False) for key in required]
        if schema.get("additionalProperties") is False:
            cases.append(({**valid, NO_SUCH_NAME: 1}, False))
        for key, sub in properties.items():
            cases += [
                ({**valid, key: value}, ok) for value, ok in cases_for(non_null(doc, sub), doc) if not ok
            ]
        return cases
    cases = [({"a": "b"}, True), ({}, True), ("a=b", False), ([("a", "b")], False)]
    values = schema.get("additionalProperties")
    if isinstance(values, dict) and values:  # typed values: each type passes, an array does not
        kinds = [kind["type"] for kind in values.get("anyOf", [values])]
        samples = {"string": "s", "integer": 3, "number": 0.5, "boolean": True}
        cases += [({"a": samples[kind]}, True) for kind in kinds]
        cases.append(({"a": [1]}, False))
    else:
        cases.append(({"a": [1], "b": {"c": None}}, True))
    return cases


def first_valid(schema: dict[str, Any], doc: dict[str, Any]) -> Any:
    return next(value for value, ok in cases_for(schema, doc) if ok)


def cases_for(schema: dict[str, Any], doc: dict[str, Any]) -> list[tuple[Any, bool]]:
    kind = schema["type"]
    if kind in ("integer", "number"):
        return numeric_cases(schema)
    if kind == "string":
        return string_cases(schema)
    if kind == "array":
        return array_cases(schema)
    if kind == "object":
        return object_cases(schema, doc)
    assert kind == "boolean", schema
    return [(True, True), (False, True), ("true", False), (1, False)]


def all_cases(provider: str, parameters: dict[str, dict[str, Any]]) -> list[Any]:
    doc = spec(provider)
    return [
        pytest.param(provider, name, value, ok, id=f"{provider}-{name}-{value!r:.20}-{'ok' if ok else 'bad'}")
        for name, schema in parameters.items()
        for value, ok in cases_for(schema, doc)
    ]


class Counter:
    def __init__(self, body: Any) -> None:
        self.body = body
        self.sent: list[Any] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(json.loads(request.content))
        return httpx.Response(200, json=self.body)


@pytest.mark.parametrize(
    ("provider", "name", "value", "ok"),
    all_cases("scale", SCALE_PARAMETERS) + all_cases("gradient", GRADIENT_PARAMETERS),
)
async def test_bounds_from_the_spec(
    make_client: Any, mode: str, provider: str, name: str, value: Any, ok: bool
) -> None:
    counter = Counter(scale_body() if provider == "scale" else GRADIENT_BODY)
    client = make_client(provider, mode, counter)
    if ok:
        await call(client.complete("model", "prompt", **{name: value}))
        assert len(counter.sent) == 1
    else:
        with pytest.raises(ValueError, match=re.escape(name)):
            await call(client.complete("model", "prompt", **{name: value}))
        assert counter.sent == []


@pytest.mark.parametrize(
    ("provider", "params"), [("scale", ScaleParams), ("gradient", GradientParams)], ids=["scale", "gradient"]
)
def test_every_field_of_the_spec_is_a_parameter(provider: str, params: Any) -> None:
    parameters = SCALE_PARAMETERS if provider == "scale" else GRADIENT_PARAMETERS
    assert set(typing.get_type_hints(params)) == set(parameters)


@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_prompt_and_model_must_not_be_empty(make_client: Any, mode: str, provider: str) -> None:
    """Gradient's spec says minLength 1 for both; for Scale the issue asks the same."""
    body = body_schema(GRADIENT_SPEC, "gradient")
    assert body["properties"]["query"]["minLength"] == 1
    assert next(p for p in GRADIENT_OPERATION["parameters"] if p["name"] == "id")["schema"]["minLength"] == 1
    counter = Counter(scale_body() if provider == "scale" else GRADIENT_BODY)
    client = make_client(provider, mode, counter)
    with pytest.raises(ValueError, match="prompt"):
        await call(client.complete("model", ""))
    with pytest.raises(ValueError, match="prompt"):
        await call(client.complete("model", None))
    with pytest.raises(ValueError, match="model"):
        await call(client.complete("", "p"))
    assert counter.sent == []
    await call(client.complete("m", "p"))
    assert len(counter.sent) == 1


@pytest.mark.usefixtures("clean_env")
def test_the_workspace_header_must_not_be_empty() -> None:
    header = next(p for p in GRADIENT_OPERATION["parameters"] if p["name"] == "x-gradient-workspace-id")
    assert header["required"]
    assert header["schema"]["minLength"] == 1
    with pytest.raises(ValueError, match="workspace_id"):
        Gradient(access_token="t", workspace_id="")


@pytest.mark.parametrize("max_retries", [-1, 1.5, True, "2"])
def test_client_options_are_checked(max_retries: Any) -> None:
    with pytest.raises(ValueError, match="max_retries"):
        Gradient(access_token="t", workspace_id="w", max_retries=max_retries)
