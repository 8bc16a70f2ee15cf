"""``Router`` and ``AsyncRouter``: many deployments as one client, each request sent to a route with
budget left, failing over to another when one fails."""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import AsyncIterable, Iterable, Mapping
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
from wrapper.batch import BatchOptions, acomplete_with, complete_with

from ._dispatch import Dispatch, Lane, State
from ._route import Route, named

__all__ = ["AsyncRouter", "Router", "RouterBase"]


class RouterBase:
    """What ``Router`` and ``AsyncRouter`` share (to annotate code that takes either): their routes,
    ``with_options`` and the state behind them."""

    _CLIENT: ClassVar[type]
    _KIND: ClassVar[str]
    _OTHER: ClassVar[str]

    def __init__(self, routes: Iterable[Route]) -> None:
        kind = type(self).__name__
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
        self._lanes = tuple(Lane(route, route.client, State(route)) for route in routes)
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

    def _checked(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """For ``complete_many``: a batch's keyword arguments, checked now: its options as a call's, its
        parameters against every route (each prompt's call takes them again)."""
        call = {name: value for name, value in kwargs.items() if name not in BatchOptions.__annotations__}
        params, _ = self._lanes[0].client.options.split(call)
        for lane in self._lanes:
            lane.route.keywords(params)
        return kwargs

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
    router closes the routes' clients.
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
