"""Request-body validation against the specs' constraints, reporting errors the way each API does.

Scale's errors are FastAPI/pydantic-style ``{loc, msg, type, input, ctx}`` items; Gradient's are
``{path, message}`` issues wrapped in a ``bodyParsingError`` payload by the app.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

Loc = tuple[str | int, ...]

_TYPES: dict[str, tuple[str, str, Callable[[Any], bool]]] = {
    "string": ("string_type", "Input should be a valid string", lambda v: isinstance(v, str)),
    "boolean": ("bool_type", "Input should be a valid boolean", lambda v: isinstance(v, bool)),
    "integer": (
        "int_type",
        "Input should be a valid integer",
        lambda v: (
            (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer())
        ),
    ),
    "number": (
        "float_type",
        "Input should be a valid number",
        lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    ),
    "array": ("list_type", "Input should be a valid list", lambda v: isinstance(v, list)),
    "object": ("dict_type", "Input should be a valid dictionary", lambda v: isinstance(v, dict)),
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


class _Checker:
    """Collects the errors of one body, field by field."""

    def __init__(self, body: Mapping[str, Any], loc: Loc) -> None:
        self.body, self.loc, self.errors = body, loc, list[dict[str, Any]]()

    def field(self, name: str, kind: str, *, nullable: bool = False, required: bool = False) -> Any:
        """The value of ``name`` if it has type ``kind`` (None when absent, null or wrong)."""
        return self.value(self.body, (*self.loc, name), name, kind, nullable=nullable, required=required)

    def value(
        self, container: Mapping[str, Any], loc: Loc, name: str, kind: str, *, nullable: bool, required: bool
    ) -> Any:
        if name not in container:
            if required:
                self.errors.append(error(loc, "missing", "Field required", dict(container)))
            return None
        value = container[name]
        if value is None and nullable:
            return None
        type_, msg, ok = _TYPES[kind]
        if not ok(value):
            self.errors.append(error(loc, type_, msg, value))
            return None
        return value

    def bound(
        self,
        name: str,
        value: Any,
        *,
        ge: float | None = None,
        le: float | None = None,
        gt: float | None = None,
        lt: float | None = None,
    ) -> None:
        """Check a number against its inclusive (ge/le) or exclusive (gt/lt) bounds."""
        loc = (*self.loc, name)
        for key, limit, type_, words in (
            ("ge", ge, "greater_than_equal", "greater than or equal to"),
            ("gt", gt, "greater_than", "greater than"),
            ("le", le, "less_than_equal", "less than or equal to"),
            ("lt", lt, "less_than", "less than"),
        ):
            if value is None or limit is None:
                continue
            ok = {"ge": value >= limit, "gt": value > limit, "le": value <= limit, "lt": value < limit}[key]
            if not ok:
                self.errors.append(
                    error(loc, type_, f"Input should be {words} {limit:g}", value, **{key: limit})
                )

    def length(
        self, loc: Loc, value: Any, *, kind: str, min_length: int = 0, max_length: int | None = None
    ) -> None:
        """Check the length of a string or list."""
        if value is None:
            return
        unit = "character" if kind == "String" else "item"
        if len(value) < min_length:
            self.errors.append(
                error(
                    loc,
                    "string_too_short" if kind == "String" else "too_short",
                    f"{kind} should have at least {min_length} {unit}{'s' * (min_length != 1)}",
                    value,
                    min_length=min_length,
                )
            )
        elif max_length is not None and len(value) > max_length:
            self.errors.append(
                error(
                    loc,
                    "string_too_long" if kind == "String" else "too_long",
                    f"{kind} should have at most {max_length} {unit}{'s' * (max_length != 1)}",
                    value,
                    max_length=max_length,
                )
            )

    def items(self, name: str, values: Any, kind: str) -> None:
        """Check each item of a list field."""
        for i, item in enumerate(values or ()):
            self.value({str(i): item}, (*self.loc, name, i), str(i), kind, nullable=False, required=True)

    def raise_if_invalid(self) -> None:
        if self.errors:
            raise Invalid(self.errors)


def parse_json(raw: bytes) -> Any:
    """The JSON document in ``raw``, or Invalid with a ``json_invalid`` error."""
    try:
        return json.loads(raw)
    except ValueError as exc:
        pos = getattr(exc, "pos", 0)
        raise Invalid(
            [error(("body", pos), "json_invalid", "JSON decode error", {}, error=str(exc))]
        ) from None


def _object(raw: bytes, loc: Loc) -> _Checker:
    body = parse_json(raw)
    if not isinstance(body, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        raise Invalid([error(loc, "model_attributes_type", msg, body)])
    return _Checker(body, loc)


_SCALE_FIELDS = {
    "model_request_parameters": "object", "temperature": "number", "stop_sequences": "array",
    "max_tokens": "integer", "top_p": "number", "top_k": "number", "frequency_penalty": "number",
    "presence_penalty": "number", "stream": "boolean", "logprobs": "boolean", "top_logprobs": "integer",
    "chat_template": "string", "chat_template_kwargs": "object", "reasoning_effort": "string",
    "prompt": "string",
}  # fmt: skip
_EFFORTS = ("low", "medium", "high")


def scale_request(raw: bytes) -> dict[str, Any]:
    """A valid ``CompletionRequestV2`` body, or Invalid."""
    check = _object(raw, ("body",))
    values = {
        name: check.field(name, kind, required=name == "prompt") for name, kind in _SCALE_FIELDS.items()
    }
    for name in check.body.keys() - _SCALE_FIELDS.keys():
        check.errors.append(
            error(("body", name), "extra_forbidden", "Extra inputs are not permitted", check.body[name])
        )
    check.bound("temperature", values["temperature"], ge=0, le=2)
    check.length(("body", "stop_sequences"), values["stop_sequences"], kind="List", max_length=4)
    check.items("stop_sequences", values["stop_sequences"], "string")
    if values["reasoning_effort"] is not None and values["reasoning_effort"] not in _EFFORTS:
        expected = "'low', 'medium' or 'high'"
        check.errors.append(
            error(
                ("body", "reasoning_effort"),
                "literal_error",
                f"Input should be {expected}",
                values["reasoning_effort"],
                expected=expected,
            )
        )
    bindings = values["model_request_parameters"]
    if bindings is not None:
        inner = _Checker(bindings, ("body", "model_request_parameters"))
        found = inner.field("bindings", "object", required=True)
        for name in bindings.keys() - {"bindings"}:
            inner.errors.append(
                error((*inner.loc, name), "extra_forbidden", "Extra inputs are not permitted", bindings[name])
            )
        for key, value in (found or {}).items():
            if not isinstance(value, str | int | float | bool):
                inner.errors.append(
                    error(
                        (*inner.loc, "bindings", key), "string_type", "Input should be a valid string", value
                    )
                )
        check.errors += inner.errors
    check.raise_if_invalid()
    return {k: v for k, v in values.items() if v is not None}


def gradient_request(raw: bytes) -> dict[str, Any]:
    """A valid ``CompleteModelBodyParams`` body, or Invalid."""
    check = _object(raw, ())
    query = check.field("query", "string", required=True)
    check.length(("query",), query, kind="String", min_length=1)
    values = {
        "query": query,
        "autoTemplate": check.field("autoTemplate", "boolean", nullable=True),
        "maxGeneratedTokenCount": check.field("maxGeneratedTokenCount", "integer", nullable=True),
        "temperature": check.field("temperature", "number", nullable=True),
        "topK": check.field("topK", "integer", nullable=True),
        "topP": check.field("topP", "number", nullable=True),
    }
    check.bound("maxGeneratedTokenCount", values["maxGeneratedTokenCount"], gt=0, lt=512)
    guidance = check.field("guidance", "object", nullable=True)
    if guidance is not None:
        inner = _Checker(guidance, ("guidance",))
        if inner.field("type", "string", required=True) not in (None, "choice"):
            inner.errors.append(
                error(
                    ("guidance", "type"),
                    "literal_error",
                    "Input should be 'choice'",
                    guidance["type"],
                    expected="'choice'",
                )
            )
        choices = inner.field("value", "array", required=True)
        inner.length(("guidance", "value"), choices, kind="List", min_length=1, max_length=10)
        inner.items("value", choices, "string")
        for i, choice in enumerate(choices or ()):
            inner.length(
                ("guidance", "value", i),
                choice if isinstance(choice, str) else None,
                kind="String",
                min_length=1,
                max_length=32,
            )
        check.errors += inner.errors
        values["guidance"] = choices
    rag = check.field("rag", "object", nullable=True)
    if rag is not None:
        inner = _Checker(rag, ("rag",))
        collection = inner.field("collectionId", "string", required=True)
        inner.length(("rag", "collectionId"), collection, kind="String", min_length=1)
        check.errors += inner.errors
        values["rag"] = collection
    check.raise_if_invalid()
    return {k: v for k, v in values.items() if v is not None}
