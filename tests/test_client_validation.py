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
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import GRADIENT_BODY, call, scale_body

from wrapper.gradient import Gradient, GradientParams
from wrapper.scale import ScaleParams

SPECS = Path(__file__).resolve().parents[1] / "specs"
GRADIENT_SPEC = json.loads((SPECS / "gradient.json").read_text())
SCALE_SPEC = yaml.safe_load((SPECS / "scale.yaml").read_text())
GRADIENT_OPERATION = GRADIENT_SPEC["paths"]["/models/{id}/complete"]["post"]
SCALE_OPERATION = SCALE_SPEC["paths"]["/v4/models/{model_deployment_id}/completions"]["post"]


def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def body_schema(spec: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any]:
    return resolve(spec, operation["requestBody"]["content"]["application/json"]["schema"])


def gradient_parameters() -> dict[str, dict[str, Any]]:
    """The keyword argument for each property of Gradient's body, with the schema its value must meet."""
    params = {}
    for name, schema in body_schema(GRADIENT_SPEC, GRADIENT_OPERATION)["properties"].items():
        if name == "query":
            continue  # the positional prompt
        if name == "guidance":  # the client takes the list of choices: the schema of `value`
            params["guidance"] = schema["properties"]["value"]
        elif name == "rag":  # the client takes the collection id
            params["rag_collection"] = schema["properties"]["collectionId"]
        else:
            params[re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), name)] = schema
    return params


def scale_parameters() -> dict[str, dict[str, Any]]:
    """The keyword argument for each property of Scale's body (all but prompt and stream), with its schema."""
    params = {}
    for name, schema in body_schema(SCALE_SPEC, SCALE_OPERATION)["properties"].items():
        if name in ("prompt", "stream"):
            continue
        schema = resolve(SCALE_SPEC, schema)
        if name == "model_request_parameters":  # the client takes the bindings mapping
            schema = schema["properties"]["bindings"]
        params[name] = schema
    return params


GRADIENT_PARAMETERS = gradient_parameters()
SCALE_PARAMETERS = scale_parameters()


def _limits(schema: dict[str, Any], side: str) -> tuple[float | None, bool]:
    """A numeric bound and whether it is exclusive, in either OpenAPI 3.0 or 3.1 spelling."""
    plain = schema.get("minimum" if side == "low" else "maximum")
    exclusive = schema.get("exclusiveMinimum" if side == "low" else "exclusiveMaximum")
    if isinstance(exclusive, int | float) and not isinstance(exclusive, bool):
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


def object_cases(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    cases: list[tuple[Any, bool]] = [({"a": "b"}, True), ({}, True), ("a=b", False), ([("a", "b")], False)]
    values = schema.get("additionalProperties")
    if isinstance(values, dict):  # typed values: each type passes, an array does not
        samples = {"string": "s", "integer": 3, "number": 0.5, "boolean": True}
        cases += [({"a": samples[kind["type"]]}, True) for kind in values["anyOf"]]
        cases.append(({"a": [1]}, False))
    else:
        cases.append(({"a": [1], "b": {"c": None}}, True))
    return cases


def cases_for(schema: dict[str, Any]) -> list[tuple[Any, bool]]:
    kind = schema["type"]
    if kind in ("integer", "number"):
        return numeric_cases(schema)
    if kind == "string":
        return string_cases(schema)
    if kind == "array":
        return array_cases(schema)
    if kind == "object":
        return object_cases(schema)
    assert kind == "boolean", schema
    return [(True, True), (False, True), ("true", False), (1, False)]


def all_cases(provider: str, parameters: dict[str, dict[str, Any]]) -> list[Any]:
    return [
        pytest.param(provider, name, value, ok, id=f"{provider}-{name}-{value!r:.20}-{'ok' if ok else 'bad'}")
        for name, schema in parameters.items()
        for value, ok in cases_for(schema)
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
    body = body_schema(GRADIENT_SPEC, GRADIENT_OPERATION)
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
