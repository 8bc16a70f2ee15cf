"""Checking what the specs state: call arguments before anything is sent, and the bodies that come back.

A rule is a function ``(name, value) -> value to send`` that raises ``ValueError`` naming the
parameter and the rule it broke. ``rule`` makes one from the constraints ``make regen`` emits into
``generated/<api>/params.py``; ``check_params`` applies a table of rules to a call's keyword
arguments, where ``None`` means "not given" and is left out of the request. ``json_object`` and
``parse_model`` read a response body (or a stream event), ``Malformed`` if it is not what the spec
promises.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

from .error_mapping import Malformed

Rule = Callable[[str, Any], Any]
T = TypeVar("T")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bounds(name: str, gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    low = f"{gt} < " if gt is not None else f"{ge} <= " if ge is not None else ""
    high = f" < {lt}" if lt is not None else f" <= {le}" if le is not None else ""
    return f"{low}{name}{high}"


def number(
    *,
    integer: bool = False,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Rule:
    """A number (an ``int`` when ``integer``), within the given bounds."""
    kinds = (int,) if integer else (int, float)
    kind = "an integer" if integer else "a number"

    def check(name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
            raise ValueError(f"{name} must be {kind}; got {_shown(value)}")
        if (
            (gt is not None and not value > gt)
            or (ge is not None and not value >= ge)
            or (lt is not None and not value < lt)
            or (le is not None and not value <= le)
        ):
            raise ValueError(f"{name} must satisfy {_bounds(name, gt, ge, lt, le)}; got {_shown(value)}")
        return value

    return check


def text(*, min_length: int = 0, max_length: int | None = None) -> Rule:
    """A string of ``min_length`` to ``max_length`` characters."""

    def check(name: str, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string; got {_shown(value)}")
        if len(value) < min_length or (max_length is not None and len(value) > max_length):
            if max_length is not None:
                rule = f"be {min_length} to {max_length} characters long"
            else:
                rule = "not be empty" if min_length == 1 else f"be at least {min_length} characters long"
            raise ValueError(f"{name} must {rule}; got {_shown(value)}")
        return value

    return check


def path_segment(name: str, value: Any) -> Any:
    """A non-empty string that can be one segment of a URL path: not "." or "..", which URLs resolve away
    (the request would go to another path)."""
    _non_empty(name, value)
    if value in (".", ".."):
        raise ValueError(f"{name} cannot be {value!r}: a URL path resolves it away")
    return value


_non_empty = text(min_length=1)


def boolean(name: str, value: Any) -> Any:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {_shown(value)}")
    return value


def one_of(allowed: Collection[Any]) -> Rule:
    """One of the ``allowed`` values (of the same type: ``True`` is not ``1``)."""
    shown = sorted(allowed, key=str)

    def check(name: str, value: Any) -> Any:
        if not any(type(value) is type(option) and value == option for option in allowed):
            raise ValueError(f"{name} must be one of {shown}; got {_shown(value)}")
        return value

    return check


def pattern(regex: str, inner: Rule) -> Rule:
    """What ``inner`` accepts, if it also matches ``regex``."""
    compiled = re.compile(regex)

    def check(name: str, value: Any) -> Any:
        value = inner(name, value)
        if not compiled.search(value):
            raise ValueError(f"{name} must match {regex!r}; got {_shown(value)}")
        return value

    return check


def array(*, min_items: int = 0, max_items: int | None = None, item: Rule, of: str = "") -> Rule:
    """A sequence (not a single string) of ``min_items`` to ``max_items`` items, each passing ``item``."""

    def check(name: str, value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ValueError(f"{name} must be a list{of}; got {_shown(value)}")
        if len(value) < min_items or (max_items is not None and len(value) > max_items):
            most = f" and at most {max_items}" if max_items is not None else ""
            raise ValueError(f"{name} must have at least {min_items}{most} items; got {len(value)}")
        return [item(f"{name}[{index}]", element) for index, element in enumerate(value)]

    return check


def mapping(
    *,
    properties: Mapping[str, Rule] | None = None,
    required: Collection[str] = (),
    values: Rule | None = None,
) -> Rule:
    """A mapping with string keys, sent as a dict: the named ``properties`` (``required`` ones present),
    and other keys only when ``values`` checks them."""
    known = dict(properties or {})

    def check(name: str, value: Any) -> Any:
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name} must be a mapping with string keys; got {_shown(value)}")
        for key in required:
            if key not in value:
                raise ValueError(f"{name} must have the key {key!r}; got {_shown(value)}")
        checked = {}
        for key, element in value.items():
            each = known.get(key, values)
            if each is None:
                raise ValueError(f"{name} has no key {key!r}; its keys are {sorted(known)}")
            checked[key] = each(f"{name}[{key!r}]", element)
        return checked

    return check


def anything(name: str, value: Any) -> Any:
    """Any value: the spec states no constraint."""
    return value


def any_of(options: Sequence[Rule], described: Sequence[str]) -> Rule:
    """What the first of ``options`` that accepts the value makes of it."""

    def check(name: str, value: Any) -> Any:
        for option in options:
            try:
                return option(name, value)
            except ValueError:
                continue
        raise ValueError(f"{name} must be {' or '.join(described)}; got {_shown(value)}")

    return check


def nullable(inner: Rule) -> Rule:
    """``None`` (sent as null), or what ``inner`` accepts."""
    return lambda name, value: None if value is None else inner(name, value)


_KINDS = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "True or False"}


def _describe(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "")
    return _KINDS.get(kind, "a list" if kind == "array" else "a mapping" if kind == "object" else "a value")


def rule(schema: Mapping[str, Any]) -> Rule:
    """The rule for a value that must meet ``schema``: constraints as ``generated/<api>/params.py`` states
    them (``exclusiveMinimum``/``exclusiveMaximum`` as numbers, ``nullable`` for null)."""
    check = _rule(schema)
    return nullable(check) if schema.get("nullable") else check


def _rule(schema: Mapping[str, Any]) -> Rule:
    kind = schema.get("type")
    if "anyOf" in schema:
        options = schema["anyOf"]
        return any_of([rule(option) for option in options], [_describe(option) for option in options])
    if "enum" in schema:
        return one_of(schema["enum"])
    if kind in ("integer", "number"):
        return number(
            integer=kind == "integer",
            gt=schema.get("exclusiveMinimum"),
            ge=schema.get("minimum"),
            lt=schema.get("exclusiveMaximum"),
            le=schema.get("maximum"),
        )
    if kind == "string":
        check = text(min_length=schema.get("minLength", 0), max_length=schema.get("maxLength"))
        return pattern(schema["pattern"], check) if "pattern" in schema else check
    if kind == "boolean":
        return boolean
    if kind == "array" or "items" in schema:
        items = schema.get("items", {})
        return array(
            min_items=schema.get("minItems", 0),
            max_items=schema.get("maxItems"),
            item=rule(items),
            of=" of strings" if items.get("type") == "string" else "",
        )
    if kind == "object" or "properties" in schema:
        extra = schema.get("additionalProperties", True)
        return mapping(
            properties={key: rule(sub) for key, sub in schema.get("properties", {}).items()},
            required=schema.get("required", ()),
            values=rule(extra) if isinstance(extra, Mapping) else anything if extra else None,
        )
    return anything


def rules(keywords: Mapping[str, Mapping[str, Any]]) -> dict[str, Rule]:
    """A rule per keyword argument, from ``KEYWORDS`` in ``generated/<api>/params.py``."""
    return {keyword: rule(data["schema"]) for keyword, data in keywords.items()}


def check_params(params: Mapping[str, Any], rules: Mapping[str, Rule]) -> dict[str, Any]:
    """The given (non-None) keyword arguments, each checked by its rule; ``TypeError`` for unknown names."""
    checked: dict[str, Any] = {}
    for name, value in params.items():
        rule = rules.get(name)
        if rule is None:
            raise TypeError(f"unexpected keyword argument {name!r}; expected one of {sorted(rules)}")
        if value is not None:
            checked[name] = rule(name, value)
    return checked


def body_fields(checked: Mapping[str, Any], keywords: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Checked keyword arguments as request-body fields: each under its wire name, reshaped if it says so."""
    body: dict[str, Any] = {}
    for keyword, value in checked.items():
        data = keywords[keyword]
        reshape = data["reshape"]
        body[data["wire"]] = value if reshape is None else {**reshape["constants"], reshape["into"]: value}
    return body


class WireBody:
    """A checked request body in its wire form, for a generated request builder (which calls ``to_dict``).

    The builder's model would take it apart and put it back together unchanged (``from_dict`` then
    ``to_dict``), at several times the cost of checking it.
    """

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields

    def to_dict(self) -> dict[str, Any]:
        """The body's JSON fields."""
        return self._fields


Kwargs = dict[str, Any]
"""A generated request builder's keyword arguments for ``httpx.request``: method, url, json, headers."""


def per_model(build: Callable[[str, WireBody], Kwargs]) -> Callable[[str, dict[str, Any]], Kwargs]:
    """A generated request builder (``build(model, body)``: its kwargs), called once per model: what it
    gives but the body (method, the path with the model quoted in it, headers) is kept for the model's
    later calls (the last 1,024 models'), and each call's kwargs carry that call's body. Quoting the path
    and building the headers cost more than the rest of a request."""

    @functools.lru_cache(maxsize=1024)
    def endpoint(model: str) -> Kwargs:
        return build(model, WireBody({}))

    def kwargs(model: str, body: dict[str, Any]) -> Kwargs:
        return {**endpoint(path_segment("model", model)), "json": body}

    return kwargs


def check_encodable(arguments: Mapping[str, Any]) -> None:
    """``ValueError`` naming the first of ``arguments`` (and where in it) that holds text UTF-8 cannot
    encode: a lone surrogate, as decoding with ``errors="surrogateescape"`` or splitting a surrogate pair
    leaves. Request bodies and URLs are UTF-8, so such text can never be sent."""
    for name, value in arguments.items():
        _check_encodable(name, value)


def _check_encodable(name: str, value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name} contains {value[exc.start]!r} at index {exc.start}, a lone surrogate, which is not "
                "text UTF-8 can encode (was it decoded with errors='surrogateescape', or a pair split?)"
            ) from None
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_encodable(f"a key of {name}", key)
            _check_encodable(f"{name}[{key!r}]", item)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_encodable(f"{name}[{index}]", item)


def prompt_rule(prompt: Mapping[str, Any]) -> Rule:
    """The rule for the positional prompt: its field's constraints, and never empty."""
    schema = prompt["schema"]
    return rule({**schema, "minLength": max(1, schema.get("minLength", 0))})


_SCAN: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]  # untyped in typeshed
"""The JSON decoder's scanner (C): ``(value, end)`` of the JSON at an index, ``StopIteration`` if there is
none; ``raw_decode`` is a Python call around it."""


def json_object(content: bytes | str) -> dict[str, Any]:
    """A JSON object body (or stream event data); ``Malformed`` if it is anything else.

    ``json.loads``, faster (a stream reads one per chunk): UTF-8 is decoded here (loads first guesses
    the encoding of bytes), and a body with no whitespace around it is read with no scan for it (a
    stream event's data has none). Anything else goes to ``json.loads``: UTF-16 or UTF-32 (which it
    reads), a byte order mark, surrounding whitespace, or not JSON (then its error).
    """
    try:
        text = content.decode() if isinstance(content, bytes) else content
        data, end = _SCAN(text, 0)
        if end != len(text):
            raise ValueError(end)
    except (ValueError, StopIteration):  # UnicodeDecodeError too
        data = _loads(content)
    except RecursionError:
        raise Malformed("is JSON nested too deeply to read") from None
    if not isinstance(data, dict):
        raise Malformed("is not a JSON object")
    return data


def _loads(content: bytes | str) -> Any:
    """``json.loads``; ``Malformed`` if ``content`` is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        raise Malformed("is not JSON") from None
    except RecursionError:
        raise Malformed("is JSON nested too deeply to read") from None


def model(from_dict: Callable[[Mapping[str, Any]], T], data: Mapping[str, Any]) -> T:
    """``data`` parsed by a generated model's ``from_dict``; ``Malformed`` if it does not have its shape."""
    try:
        return from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Malformed(f"does not match the spec ({type(exc).__name__}: {exc})") from None


def parse_model(from_dict: Callable[[Mapping[str, Any]], T], content: bytes | str) -> T:
    """A JSON body (or a stream event's data) parsed by a generated model's ``from_dict``.

    Anything that is not JSON of the model's shape raises ``Malformed``.
    """
    return model(from_dict, json_object(content))
