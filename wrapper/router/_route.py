"""``Route``: one deployment a router sends to (a client, a model, its limits, its weight, its own
keyword arguments), checked when it is made."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from wrapper import AsyncClient, SyncClient
from wrapper.pacing import LimitStore, checked_key, checked_limit, limit_store

__all__ = ["Route", "named"]

MAX_TOKENS = "max_tokens"
"""The keyword a router takes for every API's max-tokens keyword (``Api.max_tokens``)."""


def _params(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ValueError(
            f"params must be a mapping of keyword arguments (string keys) or None; got {value!r}"
        )
    return dict(value)


@attrs.frozen(eq=False)
class Route:
    """One deployment of a router: ``client`` (a client of ``wrapper.scale`` or ``wrapper.gradient``) and
    the ``model`` it is called with.

    ``name`` (default: the model, then ``model#2``, ... when several routes share one) names the route in
    results, stats and errors. ``requests_per_minute`` and ``tokens_per_minute`` are its limits (None: the
    route opens slowly and finds the rate it takes, as a batch does); ``weight`` shares the load between
    routes with budget left (2: twice the requests of a route of weight 1). ``params`` are keyword
    arguments of the route's own API, sent with every request it serves (a call's keywords win).
    ``limit_store`` (a ``redis://`` URL or a store of ``wrapper.pacing``; None: the router's) keeps the
    route's limits, its cooldown and the rate it finds with every process naming the same store and
    ``limit_key`` (None: the client's API, base URL host and the model).
    Bad values raise ``ValueError`` (``TypeError`` for a client or a keyword the API lacks) naming the
    field and the rule.
    """

    client: Any
    model: str
    name: str | None = attrs.field(default=None, kw_only=True)
    requests_per_minute: float | None = attrs.field(default=None, kw_only=True)
    tokens_per_minute: float | None = attrs.field(default=None, kw_only=True)
    weight: float = attrs.field(default=1, kw_only=True)
    params: Mapping[str, Any] = attrs.field(default=None, kw_only=True, converter=_params)
    limit_store: LimitStore | str | None = attrs.field(default=None, kw_only=True)
    limit_key: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.client, SyncClient | AsyncClient):
            raise TypeError(
                "Route: client must be a client of wrapper.scale or wrapper.gradient (Scale, AsyncScale, "
                f"Gradient, AsyncGradient); got {type(self.client).__name__}"
            )
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"Route: model must be a non-empty string; got {self.model!r}")
        if self.name is not None and (not isinstance(self.name, str) or not self.name.strip()):
            raise ValueError(
                f"Route: name must be a non-empty string (or None: the model's); got {self.name!r}"
            )
        label = f"Route {self.name or self.model!r}"
        try:
            checked_limit("requests_per_minute", self.requests_per_minute)
            checked_limit("tokens_per_minute", self.tokens_per_minute)
            limit_store(self.limit_store)
            if self.limit_key is not None:
                checked_key(self.limit_key)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{label}: {exc}") from None
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight < math.inf:
            raise ValueError(f"{label}: weight must be a number > 0; got {weight!r}")
        try:
            self.client.API.check(self.params)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{label}: params: {exc}") from None

    def keywords(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A call's keyword arguments as this route sends them: over its own ``params``, ``max_tokens``
        under its API's name for it; ``TypeError`` naming the route for a keyword its API lacks."""
        api = self.client.API
        keywords = {**self.params, **{api.max_tokens if k == MAX_TOKENS else k: v for k, v in params.items()}}
        rules = api.rules()
        for keyword in keywords:
            if keyword not in rules:
                others = ", ".join(sorted(set(rules) - {api.max_tokens}))
                raise TypeError(
                    f"route {self.name!r} ({api.name}) has no keyword argument {keyword!r}; its API's are "
                    f"{MAX_TOKENS} (sent as {api.max_tokens}) and {others}"
                )
        return keywords


def named(routes: Iterable[Route]) -> list[Route]:
    """``routes``, each with its name (a route named by none gets its model, then ``model#2``, ...);
    ``ValueError`` when two are given the same name."""
    routes = list(routes)
    given = [route.name for route in routes if route.name is not None]
    taken = set(given)
    if len(taken) < len(given):
        twice = sorted({name for name in given if given.count(name) > 1})
        raise ValueError(
            f"routes: each route needs a name of its own; {', '.join(map(repr, twice))} is given twice"
        )
    result = []
    for route in routes:
        if route.name is None:
            name, number = route.model, 2
            while name in taken:
                name, number = f"{route.model}#{number}", number + 1
            taken.add(name)
            route = attrs.evolve(route, name=name)
        result.append(route)
    return result
