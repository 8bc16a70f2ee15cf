"""Fault injection: which of the next requests misbehave, and how.

A fault is written ``key=value;key=value`` (the ``x-sandbox-fault`` header, ``--help``) or given as
keyword arguments (``Sandbox.inject``, ``POST /_sandbox/faults`` JSON). Keys:

- ``status=CODE``: answer CODE with an error body of the API's shape; ``retry-after=S`` adds
  ``Retry-After: S`` and ``retry-after-ms=MS`` adds ``retry-after-ms: MS``.
- ``delay=D``: wait D seconds before answering (combines with the others).
- ``pace=D``: a stream waits D seconds after each chunk (a slow model; combines with the others).
- ``cut=K``: a stream is cut (connection aborted) after K chunks; a non-stream request is reset.
- ``reset``: abort the connection without any response.
- ``malformed=json|shape``: answer 200 with a body that is not JSON, or JSON of the wrong shape.
- ``count=N`` (default 1), ``rate=P`` (each matching request is hit with probability P, drawn from the
  sandbox's seeded generator; with ``rate`` and no ``count`` the rule never runs out),
  ``api=gradient|scale`` and ``model=ID`` select the requests a rule applies to.

What a stream's body may do (a request that does not stream ignores these):

- ``stall=K``: after K chunks, send nothing more, holding the connection until the client leaves.
- ``keepalive=D``: while waiting (``pace``, ``stall``), send a ``: keep-alive`` comment every D seconds.
- ``end=K``: end the body cleanly after at most K chunks, without its final chunk.
- ``event=NAME``: send an event named NAME, which is not a chunk, before each chunk (e.g. ``ping``).
- ``bom``: begin the body with a UTF-8 byte order mark.
- ``done``: send ``data: [DONE]`` after the final chunk, as OpenAI-style gateways do.
- ``unterminated``: leave the final chunk (or the ``[DONE]`` after it) without its closing blank line.

Queued rules compose: every rule that matches a request (and wins its draw) fires on it and uses one
of its ``count``, so ``delay=1`` and ``status=503`` queued together give a slow 503. Where two of them
set the same key, the rule queued first gives its value (a status and its ``retry-after`` and
``retry-after-ms`` count as one key). A request's ``x-sandbox-fault`` header is that request's whole
fault: the queued rules are left for the next requests. The header's rule hits every request carrying
it, or with ``count=N`` the first N that carry it with the same request id (their ``idempotency-key``
or ``x-request-id`` header, if any): a call and its retries, so ``status=503;count=1`` gives one 503,
then the retry is served.
"""

from __future__ import annotations

import math
import random
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from wrapper import apis as _api

_EVENT_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_NOT_OTHER = ("message", "error")  # a chunk's event and an error's: not what ``event=`` is for


@dataclass(frozen=True)
class Fault:
    """How one request misbehaves."""

    status: int | None = None
    retry_after: float | None = None
    retry_after_ms: int | None = None
    delay: float = 0.0
    pace: float = 0.0
    cut: int | None = None
    reset: bool = False
    malformed: Literal["json", "shape"] | None = None
    stall: int | None = None
    keepalive: float | None = None
    end: int | None = None
    event: str | None = None
    bom: bool = False
    done: bool = False
    unterminated: bool = False

    def __post_init__(self) -> None:
        if self.malformed not in (None, "json", "shape"):
            raise ValueError(f"malformed must be 'json' or 'shape', not {self.malformed!r}")
        if self.status is not None and not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status code, not {self.status}")
        for name in ("stall", "end"):
            if (count := getattr(self, name)) is not None and count < 0:
                raise ValueError(f"{name} must be a number of chunks >= 0, not {count}")
        if self.keepalive is not None and not self.keepalive > 0:
            raise ValueError(f"keepalive must be a number of seconds > 0, not {self.keepalive}")
        if self.event is not None and (not _EVENT_NAME.fullmatch(self.event) or self.event in _NOT_OTHER):
            raise ValueError(
                f"event must be a name of letters, digits, '-', '_' or '.' other than "
                f"{' and '.join(map(repr, _NOT_OTHER))}, not {self.event!r}"
            )

    def __str__(self) -> str:
        """The fault as a rule's text (``status=503;retry-after=1``), keys it leaves unset left out."""
        unset, parts = Fault(), []
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value == getattr(unset, name):
                continue
            key = name.replace("_", "-")
            if isinstance(value, bool):
                parts.append(key)
            else:
                parts.append(
                    f"{key}={int(value) if isinstance(value, float) and value.is_integer() else value}"
                )
        return ";".join(parts)

    def headers(self) -> dict[str, str]:
        """The Retry-After headers this fault's status answer carries."""
        headers = {}
        if self.retry_after is not None:
            headers["retry-after"] = f"{self.retry_after:g}"
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        return headers


@dataclass
class Rule:
    """A fault for the next ``count`` matching requests (None: no limit), each hit with chance ``rate``."""

    fault: Fault
    count: int | None = 1
    rate: float = 1.0
    api: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.api is not None and self.api not in _api.NAMES:
            raise ValueError(f"api must be {' or '.join(map(repr, _api.NAMES))}, not {self.api!r}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be between 0 and 1, not {self.rate}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be a number of requests >= 1, not {self.count}")

    def fires(self, api: str, model: str, rng: random.Random) -> bool:
        """Whether it hits a request to ``api``/``model`` (matching it, with uses left, and winning its draw),
        using one of its ``count`` when it does."""
        if self.count == 0 or (self.api or api) != api or (self.model or model) != model:
            return False
        if self.rate < 1.0 and rng.random() >= self.rate:
            return False  # this rule spared the request
        if self.count is not None:
            self.count -= 1
        return True


_FIELD_NAMES = tuple(f.name for f in fields(Fault))
_FAULT_KEYS = set(_FIELD_NAMES)
_RULE_KEYS = {"count", "rate", "api", "model"}
_INT_KEYS = {"status", "retry_after_ms", "cut", "count", "stall", "end"}
_FLOAT_KEYS = {"retry_after", "delay", "pace", "rate", "keepalive"}
_BOOL_KEYS = {"reset", "bom", "done", "unterminated"}
_NULLABLE_KEYS = {f.name for f in fields(Fault) if f.default is None} | {"count", "api", "model"}


def _checked(key: str, value: Any) -> Any:
    """``value`` if it has the type option ``key`` takes (options may come as JSON), else ValueError."""
    if value is None:
        ok = key in _NULLABLE_KEYS
    elif key in _INT_KEYS:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif key in _FLOAT_KEYS:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    else:
        ok = isinstance(value, bool) if key in _BOOL_KEYS else isinstance(value, str)
    if not ok:
        raise ValueError(f"fault option {key} cannot be {value!r}")
    return value


def make_rule(**options: Any) -> Rule:
    """A rule from keyword options (the keys of the module docstring, with ``_`` for ``-``)."""
    unknown = set(options) - _FAULT_KEYS - _RULE_KEYS
    if unknown:
        raise ValueError(f"unknown fault option(s): {', '.join(sorted(unknown))}")
    options = {key: _checked(key, value) for key, value in options.items()}
    rule_options = {k: v for k, v in options.items() if k in _RULE_KEYS}
    if "rate" in options and "count" not in options:
        rule_options["count"] = None
    fault = Fault(**{k: v for k, v in options.items() if k in _FAULT_KEYS})
    return Rule(fault, **rule_options)


def parse_rule(spec: str) -> Rule:
    """A rule from ``key=value;key=value`` text, e.g. ``status=429;retry-after=1;count=2``."""
    return make_rule(**_options(spec))


def _options(spec: str) -> dict[str, Any]:
    """The keyword options in ``key=value;key=value`` text (``ValueError`` for a value of the wrong type)."""
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key in _BOOL_KEYS:
            options[key] = value.strip().lower() not in ("0", "false", "no")
        elif key in _INT_KEYS:
            options[key] = int(value)
        elif key in _FLOAT_KEYS:
            options[key] = float(value)
        else:
            options[key] = value.strip()
    return options


class FaultPlan:
    """The queued rules; ``take`` makes the fault (if any) of one request. Safe to use from any thread.

    Every rule that matches the request's api and model and, with a ``rate``, wins its draw (each rule
    draws on its own) fires; their faults are merged, the earlier rule's value winning a shared key.
    ``take_header`` does the same for one ``x-sandbox-fault`` header, whose ``count`` is kept per request id.
    """

    HEADERS_KEPT = 10_000
    """The most header rules with a ``count`` kept (by request id and text), the least recently used
    forgotten first."""

    def __init__(self, seed: int | None) -> None:
        self._rules: list[Rule] = []
        self._headers: OrderedDict[tuple[str, str], Rule] = OrderedDict()
        self._lock = threading.Lock()
        self._rng = random.Random(seed)

    def add(self, rule: Rule) -> None:
        """Queue ``rule`` after the others."""
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        """Forget every queued rule."""
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[Rule]:
        """A snapshot of the queued rules."""
        with self._lock:
            return list(self._rules)

    def take(self, api: str, model: str) -> Fault | None:
        """The fault for the next request to ``api``/``model``, consuming one use of each rule that fires."""
        if not self._rules:
            return None
        fired: list[Fault] = []
        with self._lock:
            for rule in list(self._rules):
                if rule.fires(api, model, self._rng):
                    fired.append(rule.fault)
                    if rule.count == 0:
                        self._rules.remove(rule)
        return _merged(fired)

    def take_header(self, spec: str, api: str, model: str, request_id: str) -> Fault | None:
        """The fault of a request to ``api``/``model`` whose ``x-sandbox-fault`` header is ``spec``: the rule
        it states (``ValueError`` if it states none), hitting every request that carries it, or with a
        ``count`` the first that many of those with the same ``request_id`` ("" for none)."""
        options = _options(spec)
        options.setdefault("count", None)
        rule = make_rule(**options)
        with self._lock:
            if rule.count is not None:
                key = (request_id, spec)
                rule = self._headers.setdefault(key, rule)
                self._headers.move_to_end(key)
                if len(self._headers) > self.HEADERS_KEPT:
                    self._headers.popitem(last=False)
            return rule.fault if rule.fires(api, model, self._rng) else None


_MERGED_AS_ONE = (("status", "retry_after", "retry_after_ms"),)  # a status comes with its own headers
_MERGE_GROUPS = (*_MERGED_AS_ONE, *((name,) for name in _FAULT_KEYS - set().union(*_MERGED_AS_ONE)))


def _merged(faults: list[Fault]) -> Fault | None:
    """One fault doing what each of ``faults`` does; for a key several set, the first one's value
    (a status and its Retry-After headers go together)."""
    if not faults:
        return None
    unset = Fault()
    merged: dict[str, Any] = {}
    for group in _MERGE_GROUPS:
        given = (fault for fault in faults if any(getattr(fault, k) != getattr(unset, k) for k in group))
        if (first := next(given, None)) is not None:
            merged.update((k, getattr(first, k)) for k in group)
    return replace(unset, **merged)
