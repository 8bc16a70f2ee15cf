"""Hypothesis strategies for the JSON bodies the specs describe: valid ones, and mutated ones."""

from __future__ import annotations

import json
import math
import os
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

SPECS = Path(__file__).resolve().parents[2] / "specs"


def fuzz_settings(max_examples: int) -> settings:
    """Hypothesis settings: ``max_examples`` per property, no deadline, no slow "explain" phase.

    Under CI (``CI`` set) the examples are derandomized, so a run is repeatable and a merge can't be
    turned red by a rare draw; everywhere else each run explores new examples.
    """
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=bool(os.environ.get("CI")),
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


MAX_ITEMS = 4  # the length of generated arrays whose schema sets no maxItems: keeps the run small

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@cache
def spec(name: str) -> dict[str, Any]:
    """The parsed ``specs/<name>`` document."""
    text = (SPECS / name).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
    return loaded


def schema(spec_name: str, name: str) -> dict[str, Any]:
    """The component schema ``name`` of ``specs/<spec_name>``."""
    found: dict[str, Any] = spec(spec_name)["components"]["schemas"][name]
    return found


def from_schema(node: dict[str, Any], spec_name: str) -> st.SearchStrategy[Any]:
    """Values valid against ``node`` (the subset of JSON Schema the two specs use; ``$ref``s resolved)."""
    if "$ref" in node:
        return from_schema(schema(spec_name, node["$ref"].rsplit("/", 1)[1]), spec_name)
    if "oneOf" in node or "anyOf" in node:
        return st.one_of([from_schema(sub, spec_name) for sub in node.get("oneOf") or node["anyOf"]])
    if "enum" in node:
        base: st.SearchStrategy[Any] = st.sampled_from(node["enum"])
    else:
        base = _typed(node, spec_name)
    return st.none() | base if node.get("nullable") else base


def _typed(node: dict[str, Any], spec_name: str) -> st.SearchStrategy[Any]:
    kind = node.get("type")
    if kind == "string":
        return st.text(min_size=node.get("minLength", 0), max_size=node.get("maxLength", 40))
    if kind in ("integer", "number"):
        return _numbers(node)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        if "prefixItems" in node:
            return st.tuples(*(from_schema(sub, spec_name) for sub in node["prefixItems"])).map(list)
        low = node.get("minItems", 0)
        return st.lists(
            from_schema(node.get("items", {}), spec_name),
            min_size=low,
            max_size=node.get("maxItems", max(low, MAX_ITEMS)),
        )
    extra = node.get("additionalProperties")
    if kind == "object" and "properties" not in node and extra not in (None, False):
        values = JSON_VALUES if extra is True else from_schema(extra, spec_name)
        return st.dictionaries(st.text(max_size=8), values, max_size=3)
    if kind == "object" or "properties" in node:
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        return st.fixed_dictionaries(
            {key: from_schema(sub, spec_name) for key, sub in properties.items() if key in required},
            optional={
                key: from_schema(sub, spec_name) for key, sub in properties.items() if key not in required
            },
        )
    return JSON_VALUES  # no type: any JSON value


def _numbers(node: dict[str, Any]) -> st.SearchStrategy[Any]:
    low, high = node.get("minimum"), node.get("maximum")
    exclude_low = node.get("exclusiveMinimum") is True  # OpenAPI 3.0 booleans
    exclude_high = node.get("exclusiveMaximum") is True
    if node["type"] == "integer":
        return st.integers(
            None if low is None else math.floor(low) + exclude_low,
            None if high is None else math.ceil(high) - exclude_high,
        )
    return st.floats(
        low, high, exclude_min=exclude_low, exclude_max=exclude_high, allow_nan=False, allow_infinity=False
    )


# -- mutations -----------------------------------------------------------------------------------------------


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (a tuple of keys/indexes) to a value nested inside ``value``."""
    found = []
    children = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )
    for key, child in children:
        found.append((*prefix, key))
        found.extend(_paths(child, (*prefix, key)))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with the item at ``path`` set to ``new`` (deleted when ``new`` is ``_DELETE``)."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    head, rest = path[0], path[1:]
    if rest:
        copy[head] = _replace(copy[head], rest, new)
    elif new is _DELETE:
        del copy[head]
    else:
        copy[head] = new
    return copy


_DELETE = object()
HUGE = 200_000
NON_JSON = st.sampled_from(
    [
        b"",
        b"<html><body>502 Bad Gateway</body></html>",
        b"Internal Server Error",
        b"\xff\xfe\x00garbage\x80",
        b"null",
        b"NaN",
        b"{",
        b"[",
        b'{"completions": [["a", ["b"]]]}{"x": 1}',
    ]
) | st.binary(max_size=64)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> bytes:
    """The bytes of a body drawn from ``valid``, then broken in one of the ways real servers break them."""
    body = draw(valid)
    paths = _paths(body)
    how = draw(st.sampled_from(["drop", "retype", "extra", "huge", "unicode", "truncate", "toplevel", "raw"]))
    if how in ("drop", "retype", "huge", "unicode") and not paths:
        how = "extra"
    if how == "drop":
        body = _replace(body, draw(st.sampled_from(paths)), _DELETE)
    elif how == "retype":
        body = _replace(body, draw(st.sampled_from(paths)), draw(JSON_VALUES))
    elif how == "extra" and isinstance(body, dict):
        body = {**body, draw(st.text(max_size=12)): draw(JSON_VALUES)}
    elif how == "huge":
        body = _replace(
            body, draw(st.sampled_from(paths)), draw(st.sampled_from(["x", "é", "\U0001f600"])) * HUGE
        )
    elif how == "unicode":
        body = _replace(
            body, draw(st.sampled_from(paths)), draw(st.text(st.characters(codec="utf-8"), min_size=1))
        )
    elif how == "toplevel":
        body = draw(JSON_VALUES.filter(lambda v: not isinstance(v, dict)))
    elif how == "raw":
        return draw(NON_JSON)
    data = json.dumps(body, ensure_ascii=draw(st.booleans())).encode()
    if how == "truncate":
        return data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    return data
