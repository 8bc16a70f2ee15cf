"""Checking call arguments against the constraints the specs state, before anything is sent.

A rule is a function ``(name, value) -> value to send`` that raises ``ValueError`` naming the
parameter and the rule it broke. ``check_params`` applies a table of rules to a call's keyword
arguments; ``None`` means "not given" and is left out of the request.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

Rule = Callable[[str, Any], Any]


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
    text(min_length=1)(name, value)
    if value in (".", ".."):
        raise ValueError(f"{name} cannot be {value!r}: a URL path resolves it away")
    return value


def boolean(name: str, value: Any) -> Any:
    """``True`` or ``False``."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False; got {_shown(value)}")
    return value


def one_of(allowed: Collection[str]) -> Rule:
    """One of the ``allowed`` strings."""

    def check(name: str, value: Any) -> Any:
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"{name} must be one of {sorted(allowed)}; got {_shown(value)}")
        return value

    return check


def texts(*, min_items: int = 0, max_items: int | None = None, item: Rule | None = None) -> Rule:
    """A sequence (not a single string) of ``min_items`` to ``max_items`` strings, each passing ``item``."""
    each = item if item is not None else text()

    def check(name: str, value: Any) -> Any:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ValueError(f"{name} must be a list of strings; got {_shown(value)}")
        if len(value) < min_items or (max_items is not None and len(value) > max_items):
            most = f" and at most {max_items}" if max_items is not None else ""
            raise ValueError(f"{name} must have at least {min_items}{most} items; got {len(value)}")
        return [each(f"{name}[{index}]", element) for index, element in enumerate(value)]

    return check


def mapping(*, values: tuple[type, ...] | None = None) -> Rule:
    """A mapping with string keys (and, if given, values of the ``values`` types); sent as a dict."""

    def check(name: str, value: Any) -> Any:
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name} must be a mapping with string keys; got {_shown(value)}")
        if values is not None:
            for key, element in value.items():
                if not isinstance(element, values):
                    allowed = ", ".join(kind.__name__ for kind in values)
                    raise ValueError(f"{name}[{key!r}] must be one of {allowed}; got {_shown(element)}")
        return dict(value)

    return check


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
