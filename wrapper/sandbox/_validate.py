"""Request-body validation against the normalised specs, reporting errors the way each API does.

Each body is checked with jsonschema against its operation's request-body schema in
``generated/<api>/spec.json`` (written by ``make regen``), so a regenerated spec's new fields are
accepted and its bounds enforced with no edit here. jsonschema's errors are reworded as
FastAPI/pydantic-style ``{type, loc, msg, input, ctx}`` items: Scale sends them in its 422, and
Gradient's app wraps them in a ``bodyParsingError`` payload.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from openapi_schema_validator import OAS30Validator, OAS31Validator

from wrapper import apis

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Operation:
    """The operation whose request body an API's handler serves: the API whose ``spec.json`` holds it,
    its spec path and method, where its errors point (FastAPI's start at ``body``), and its ``counts``:
    the body fields that count tokens, which the service refuses below 0 even where the spec states no
    bound (as a ``ge=0`` field would be refused)."""

    api: str
    path: str
    method: str
    loc: Loc = ()
    counts: tuple[str, ...] = ()


SPECS = apis.SPECS
"""Where ``<api>/spec.json`` is read from (tests point it at a regenerated copy)."""

_TYPES = {
    "string": ("string_type", "Input should be a valid string"),
    "boolean": ("bool_type", "Input should be a valid boolean"),
    "integer": ("int_type", "Input should be a valid integer"),
    "number": ("float_type", "Input should be a valid number"),
    "array": ("list_type", "Input should be a valid list"),
    "object": ("dict_type", "Input should be a valid dictionary"),
    "null": ("none_required", "Input should be None"),
}
_BOUNDS = {
    "ge": ("greater_than_equal", "greater than or equal to"),
    "gt": ("greater_than", "greater than"),
    "le": ("less_than_equal", "less than or equal to"),
    "lt": ("less_than", "less than"),
}


class Invalid(Exception):
    """The request failed validation; ``errors`` are pydantic-style dicts."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors)
        self.errors = errors


def error(loc: Loc, type_: str, msg: str, value: Any = None, **ctx: Any) -> dict[str, Any]:
    """One pydantic-style error item."""
    item: dict[str, Any] = {"type": type_, "loc": list(loc), "msg": msg, "input": value}
    if ctx:
        item["ctx"] = ctx
    return item


MAX_DEPTH = 64
"""How deeply a body's arrays and objects may nest (far more than any request the specs define): a deeper
body is invalid JSON, as the services' parsers, which limit nesting, refuse it."""


def parse_json(raw: bytes) -> Any:
    """The JSON document in ``raw``, or Invalid with a ``json_invalid`` error: for text that is not JSON
    (``NaN``, ``Infinity`` and numbers too large for a double included), nesting deeper than
    ``MAX_DEPTH``, or a lone surrogate."""
    try:
        document = json.loads(raw, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:  # nested far deeper than MAX_DEPTH
        raise _nested_too_deeply() from None
    except ValueError as exc:
        pos = getattr(exc, "pos", 0)
        raise Invalid(
            [error(("body", pos), "json_invalid", "JSON decode error", {}, error=str(exc))]
        ) from None
    if _too_deep(document):
        raise _nested_too_deeply()
    if b"\\u" in raw:  # JSON's escapes can spell a lone surrogate, which the services' parsers refuse
        try:
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            found = f"lone surrogate {exc.object[exc.start]!r} in a string: not text UTF-8 can encode"
            raise Invalid([error(("body",), "json_invalid", "JSON decode error", {}, error=found)]) from None
    return document


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON: RFC 8259 has no NaN or Infinity")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for JSON's double precision")
    return value


def _nested_too_deeply() -> Invalid:
    found = f"arrays and objects nested deeper than {MAX_DEPTH} levels"
    return Invalid([error(("body",), "json_invalid", "JSON decode error", {}, error=found)])


def _too_deep(document: Any) -> bool:
    """Whether ``document`` nests arrays and objects deeper than ``MAX_DEPTH`` (walked without recursion)."""
    stack = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def request_body(operation: Operation, raw: bytes) -> dict[str, Any]:
    """The JSON object in ``raw`` if it is a valid request body of ``operation`` (null fields dropped),
    or Invalid."""
    body = parse_json(raw)
    validator, prefix = _validator(SPECS, operation)
    errors: list[dict[str, Any]] = []
    for problem in validator.iter_errors(body):
        for item in _items(problem, prefix):
            if item not in errors:  # OAS 3.0's type check can report one null twice
                errors.append(item)
    errors += _negative_counts(operation, body, {tuple(item["loc"]) for item in errors})
    if errors:
        raise Invalid(errors)
    return {name: value for name, value in body.items() if value is not None}


def _negative_counts(operation: Operation, body: Any, reported: set[Loc]) -> list[dict[str, Any]]:
    """The errors for the token counts in ``body`` below 0 that the spec's checks have not reported."""
    if not isinstance(body, dict):
        return []
    errors = []
    for field in operation.counts:
        value, loc = body.get(field), (*operation.loc, field)
        negative = isinstance(value, int | float) and not isinstance(value, bool) and value < 0
        if negative and loc not in reported:
            type_, words = _BOUNDS["ge"]
            errors.append(error(loc, type_, f"Input should be {words} 0", value, ge=0))
    return errors


@cache
def _validator(specs: Path, operation: Operation) -> tuple[Validator, Loc]:
    """The compiled validator of ``operation``'s request body, read once from ``specs/<api>/spec.json``."""
    spec = json.loads((specs / operation.api / "spec.json").read_text(encoding="utf-8"))
    schema = spec["paths"][operation.path][operation.method]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    oas30 = str(spec.get("openapi", "")).startswith("3.0")
    # $refs inlined: resolving them on every request would cost a third of the time; a recursive one
    # stays, resolved against the spec's components
    inlined = _inlined(schema, spec, oas30, frozenset())
    validator: Validator = (_OAS30 if oas30 else OAS31Validator)(
        {**inlined, "components": spec.get("components", {})}
    )
    return validator, operation.loc


def _inlined(node: Any, spec: Mapping[str, Any], oas30: bool, seen: frozenset[str]) -> Any:
    """``node`` with each local ``$ref`` replaced by its target (OAS 3.0 ignores a ``$ref``'s siblings)."""
    if isinstance(node, list):
        return [_inlined(item, spec, oas30, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
        return {key: _inlined(value, spec, oas30, seen) for key, value in node.items()}
    target: Any = spec
    for part in ref[2:].split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    target = _inlined(target, spec, oas30, seen | {ref})
    siblings = {key: _inlined(value, spec, oas30, seen) for key, value in node.items() if key != "$ref"}
    return target if oas30 or not siblings else {**siblings, "allOf": [target]}


def _nullable(keyword: Callable[..., Iterator[ValidationError]]) -> Callable[..., Iterator[ValidationError]]:
    """``keyword``, except that null passes where the schema says ``nullable: true``."""

    def check(
        validator: Any, value: Any, instance: Any, schema: Mapping[str, Any]
    ) -> Iterator[ValidationError]:
        if instance is None and schema.get("nullable") is True:
            return
        yield from keyword(validator, value, instance, schema)

    return check


# OAS 3.0's ``{nullable: true, allOf: [{$ref: ...}]}`` (normalize.py's shape of a nullable object) takes null
_OAS30 = extend(
    OAS30Validator, {kw: _nullable(OAS30Validator.VALIDATORS[kw]) for kw in ("allOf", "anyOf", "oneOf")}
)


def _items(problem: ValidationError, prefix: Loc) -> Iterator[dict[str, Any]]:
    """The pydantic-style items for one jsonschema error."""
    loc: Loc = (*prefix, *problem.absolute_path)
    keyword, limit, value = problem.validator, problem.validator_value, problem.instance
    if keyword == "type":
        if not problem.absolute_path and limit == "object":
            msg = "Input should be a valid dictionary or object to extract fields from"
            yield error(loc, "model_attributes_type", msg, value)
            return
        kinds = [limit] if isinstance(limit, str) else [k for k in limit if k != "null"] or ["null"]
        type_, msg = _TYPES.get(kinds[0], ("type_error", str(problem.message)))
        yield error(loc, type_, msg, value)
    elif keyword == "required":
        for name in limit:
            if name not in value:
                yield error((*loc, name), "missing", "Field required", value)
    elif keyword == "additionalProperties" and limit is False:
        known = problem.schema.get("properties", {})
        patterns = problem.schema.get("patternProperties", {})
        for name in value:
            if name not in known and not any(re.search(p, name) for p in patterns):
                yield error((*loc, name), "extra_forbidden", "Extra inputs are not permitted", value[name])
    elif keyword in ("enum", "const"):
        choices = [repr(choice) for choice in (limit if keyword == "enum" else [limit])]
        expected = choices[0] if len(choices) == 1 else f"{', '.join(choices[:-1])} or {choices[-1]}"
        yield error(loc, "literal_error", f"Input should be {expected}", value, expected=expected)
    elif keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        lower = keyword.endswith("inimum")
        exclusive = keyword.startswith("exclusive") or problem.schema.get(f"exclusiveM{keyword[1:]}") is True
        key = ("gt" if exclusive else "ge") if lower else ("lt" if exclusive else "le")
        type_, words = _BOUNDS[key]
        yield error(loc, type_, f"Input should be {words} {limit:g}", value, **{key: limit})
    elif keyword in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
        short = keyword.startswith("min")
        kind, unit = {"L": ("String", "character"), "I": ("List", "item"), "P": ("Dictionary", "item")}[
            keyword[3]
        ]
        type_ = ("string_" if kind == "String" else "") + ("too_short" if short else "too_long")
        msg = f"{kind} should have {'at least' if short else 'at most'} {limit} {unit}{'s' * (limit != 1)}"
        yield error(loc, type_, msg, value, **{"min_length" if short else "max_length": limit})
    elif keyword == "pattern":
        msg = f"String should match pattern '{limit}'"
        yield error(loc, "string_pattern_mismatch", msg, value, pattern=limit)
    elif keyword == "multipleOf":
        yield error(loc, "multiple_of", f"Input should be a multiple of {limit:g}", value, multiple_of=limit)
    elif keyword in ("anyOf", "oneOf") and problem.context:
        first = min(problem.context, key=lambda e: (e.relative_schema_path[0], len(e.absolute_path)))
        yield from _items(first, prefix)  # a union is reported by its first member, as pydantic starts
    else:
        yield error(loc, "value_error", problem.message, value)
