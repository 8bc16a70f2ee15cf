"""``Router`` and ``AsyncRouter``: many deployments as one client, each request sent to a route with
budget left, failing over to another when one fails."""

from __future__ import annotations

import copy
import dataclasses
import functools
import threading
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, Self, Unpack

from wrapper import (
    AsyncBatchIterator,
    AsyncClient,
    AsyncCompletionStream,
    AsyncWithRawResponse,
    AsyncWithStreamingResponse,
    BatchIterator,
    Completion,
    CompletionStream,
    HookFactory,
    RequestOptions,
    SyncClient,
    WithRawResponse,
    WithStreamingResponse,
)
from wrapper.batch import (
    BatchOptions,
    Budget,
    TargetJob,
    acomplete_with,
    afan_out_jobs,
    afan_out_with,
    complete_with,
    fan_out_with,
)
from wrapper.errors import APIError
from wrapper.pacing import LimitStore
from wrapper.pacing import limit_store as limit_store_of

from ._dispatch import Dispatch, Lane, State
from ._errors import AllRoutesFailedError
from ._route import Route, named

__all__ = ["AsyncRouter", "Router", "RouterBase"]

_FAN_OUT = frozenset({"concurrency", "ordered", "return_exceptions", "budget"})
"""What ``fan_out`` takes besides ``complete``'s keyword arguments (``BatchOptions`` but the limits)."""


class RouterBase:
    """What ``Router`` and ``AsyncRouter`` share (to annotate code that takes either): their routes,
    ``with_options`` and the state behind them."""

    _CLIENT: ClassVar[type]
    _KIND: ClassVar[str]
    _OTHER: ClassVar[str]

    def __init__(self, routes: Iterable[Route], *, limit_store: LimitStore | str | None = None) -> None:
        kind = type(self).__name__
        try:
            limit_store_of(limit_store)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{kind}: {exc}") from None
        if isinstance(routes, str | bytes | Mapping) or not isinstance(routes, Iterable):
            raise TypeError(f"{kind}: routes must be a list of Route(...); got {type(routes).__name__}")
        routes = list(routes)
        if not routes:
            raise ValueError(f"{kind}: routes must hold at least one Route")
        for route in routes:
            if not isinstance(route, Route):
                raise TypeError(f"{kind}: routes must be Route(client, model, ...) values; got {route!r}")
        routes = named(routes)
        for route in routes:
            if not isinstance(route.client, self._CLIENT):
                raise TypeError(
                    f"{kind} takes {self._KIND} clients; route {route.name!r} has a "
                    f"{type(route.client).__name__}: use {self._OTHER} for it"
                )
        self._lanes = tuple(Lane(route, route.client, State(route, limit_store)) for route in routes)
        self._lock = threading.Lock()
        self._hooks: tuple[HookFactory, ...] = ()

    @property
    def routes(self) -> tuple[Route, ...]:
        """The routes, each with its name."""
        return tuple(lane.route for lane in self._lanes)

    def with_options(self, **options: Unpack[RequestOptions]) -> Self:
        """A router with other request options, applied to each route's client (its ``with_options``),
        sharing this router's routes: their limits, cooldowns and connection pools. Closing it closes
        its copies of the clients alone, as a client's ``with_options`` copy does."""
        given: dict[str, Any] = dict(options)
        hooks = tuple(given.pop("hooks", None) or ())
        self._lanes[0].client.options.merged({"hooks": hooks})  # checked as a client checks them
        clone = copy.copy(self)
        clone._lanes = tuple(
            dataclasses.replace(lane, client=lane.client.with_options(**given)) for lane in self._lanes
        )
        clone._hooks = self._hooks + hooks
        return clone

    def _dispatch(self, prompt: str, kwargs: Mapping[str, Any]) -> Dispatch:
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string; got {type(prompt).__name__}")
        return Dispatch(self._lanes, self._lock, self._hooks, prompt, kwargs)

    def _checked(
        self, kwargs: dict[str, Any], batch: Iterable[str] = BatchOptions.__annotations__
    ) -> dict[str, Any]:
        """For ``complete_many`` and ``fan_out``: a batch's keyword arguments, checked now (``batch``: the
        names the batch takes itself): its options as a call's, its parameters against every route (each
        prompt's call takes them again)."""
        call = {name: value for name, value in kwargs.items() if name not in batch}
        params, _ = self._lanes[0].client.options.split(call)
        for lane in self._lanes:
            lane.route.keywords(params)
        return kwargs

    def _pinned(self) -> dict[str, Self]:
        """This router pinned to each of its routes, by name: a fan-out's targets. Each one's requests go
        to its route alone, paced by the route's pacer (shared with this router's other calls) and retried
        on it as ``max_retries`` allows."""
        pinned = {}
        for lane in self._lanes:
            one = copy.copy(self)
            one._lanes = (lane,)
            pinned[lane.name] = one
        return pinned

    def _clients(self) -> list[Any]:
        """Each route's client once (routes may share one)."""
        return list({id(lane.client): lane.client for lane in self._lanes}.values())

    def __repr__(self) -> str:
        routes = ", ".join(f"{lane.name}: {lane.client.API.name} {lane.route.model}" for lane in self._lanes)
        return f"{type(self).__name__}([{routes}])"


class Router(RouterBase):
    """Many deployments as one client: ``Router([Route(Scale(...), "model", requests_per_minute=600), ...])``.

    ``complete``, ``stream`` and ``complete_many`` take a prompt and the keyword arguments the clients
    take (``max_tokens`` is sent under each route's API's name for it) and request options. Each
    request goes to a route with budget left; a retriable failure (connection, timeout, 429, 5xx) sends
    it to another route, a request error (400, 401, 404, 422, flagged content) is raised as it is. A
    route that keeps failing cools down. Results name their route (``Completion.route``). Closing the
    router closes the routes' clients. ``limit_store`` (a ``redis://`` URL or a store of
    ``wrapper.pacing``) keeps the limits, cooldowns and found rates of the routes that name no store of
    their own, shared with every process naming the same store and limit key: a service's workers and
    replicas keep each deployment's limit together.
    """

    _CLIENT = SyncClient
    _KIND = "sync"
    _OTHER = "AsyncRouter"

    def complete(self, prompt: str, **kwargs: Any) -> Completion:
        """Complete ``prompt`` on a route; ``AllRoutesFailedError`` when every route failed as many times
        as ``max_retries`` allows."""
        return self._dispatch(prompt, kwargs).complete(prompt)

    def stream(self, prompt: str, **kwargs: Any) -> CompletionStream:
        """The completion as it is generated, from one route; a failure before the first chunk sends the
        request to another route, never after (as a client's stream is retried until its first chunk)."""
        return self._dispatch(prompt, kwargs).stream(prompt)

    def complete_many(self, prompts: Iterable[str], **kwargs: Any) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, each route paced to its own
        limits; as a client's ``complete_many`` otherwise (``.stats.routes`` has each route's figures).
        ``kwargs`` are ``complete``'s and ``wrapper.batch.BatchOptions`` but the limits."""
        return complete_with(self.complete, prompts, **self._checked(kwargs))

    def fan_out(self, prompts: Iterable[str], **kwargs: Any) -> BatchIterator:
        """Every prompt to each route (to compare models or deployments): one result per (prompt, route),
        ``BatchResult.target`` naming the route, rather than each prompt to one route.

        Each route is paced to its own limits and retries on itself as ``max_retries`` allows; a failure is
        the route's own error. ``concurrency`` bounds the requests in flight over all routes; ``ordered``
        gives the results by prompt, then in the routes' order. ``.stats.routes`` has each route's figures.
        ``kwargs`` are ``complete``'s and ``concurrency``, ``ordered``, ``return_exceptions``, ``budget``.
        """
        targets = {name: functools.partial(_route_complete, one) for name, one in self._pinned().items()}
        return fan_out_with(targets, prompts, **self._checked(kwargs, _FAN_OUT))

    with_raw_response = property(WithRawResponse)
    with_streaming_response = property(WithStreamingResponse)

    def close(self) -> None:
        """Close the routes' clients (a ``with_options`` router's: its copies of them alone)."""
        for client in self._clients():
            client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _route_complete(pinned: Router, prompt: str, **kwargs: Any) -> Completion:
    """``complete`` on a router pinned to one route, a failure raised as that route's own error."""
    try:
        return pinned.complete(prompt, **kwargs)
    except AllRoutesFailedError as exc:
        raise _own(exc) from None


async def _aroute_complete(pinned: AsyncRouter, prompt: str, **kwargs: Any) -> Completion:
    """The async ``_route_complete``."""
    try:
        return await pinned.complete(prompt, **kwargs)
    except AllRoutesFailedError as exc:
        raise _own(exc) from None


def _own(exc: AllRoutesFailedError) -> APIError:
    """The last error of the one route a request was sent to: a fan-out compares routes, so it is that
    route's answer (rather than ``AllRoutesFailedError`` summing up one route)."""
    (error,) = exc.errors.values()
    return error


class AsyncRouter(RouterBase):
    """The async ``Router``, over async clients: the same methods, awaited; ``stream`` and
    ``complete_many`` are async iterators; ``await router.close()`` (or ``async with``)."""

    _CLIENT = AsyncClient
    _KIND = "async"
    _OTHER = "Router"

    async def complete(self, prompt: str, **kwargs: Any) -> Completion:
        """Complete ``prompt`` on a route (see ``Router.complete``)."""
        return await self._dispatch(prompt, kwargs).acomplete(prompt)

    def stream(self, prompt: str, **kwargs: Any) -> AsyncCompletionStream:
        """The completion as it is generated (``async for``), failing over before its first chunk only."""
        return self._dispatch(prompt, kwargs).astream(prompt)

    def complete_many(self, prompts: Iterable[str] | AsyncIterable[str], **kwargs: Any) -> AsyncBatchIterator:
        """The async ``Router.complete_many``: prompts from an (async) iterable, ``async for`` the results."""
        return acomplete_with(self.complete, prompts, **self._checked(kwargs))

    def fan_out(self, prompts: Iterable[str] | AsyncIterable[str], **kwargs: Any) -> AsyncBatchIterator:
        """The async ``Router.fan_out``: every prompt to each route, ``async for`` the results."""
        return afan_out_with(self._targets(), prompts, **self._checked(kwargs, _FAN_OUT))

    def fan_out_jobs(
        self,
        jobs: Iterable[TargetJob],
        *,
        concurrency: int,
        ordered: bool = False,
        return_exceptions: bool = False,
        budget: Budget | None = None,
    ) -> AsyncBatchIterator:
        """``fan_out``'s jobs as they are, each a prompt for one route (named) with its own index and
        parameters (``wrapper.batch.TargetJob``): the command line's fan-out, which sends a prompt only
        to the routes that have not answered it yet."""
        return afan_out_jobs(self._targets(), jobs, concurrency=concurrency, ordered=ordered,
                             return_exceptions=return_exceptions, budget=budget)  # fmt: skip

    def _targets(self) -> dict[str, Callable[..., Awaitable[Completion]]]:
        """Each route's own ``complete``, by name: a fan-out's targets."""
        return {name: functools.partial(_aroute_complete, one) for name, one in self._pinned().items()}

    with_raw_response = property(AsyncWithRawResponse)
    with_streaming_response = property(AsyncWithStreamingResponse)

    async def close(self) -> None:
        """Close the routes' clients (a ``with_options`` router's: its copies of them alone)."""
        for client in self._clients():
            await client.close()

    aclose = close

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
