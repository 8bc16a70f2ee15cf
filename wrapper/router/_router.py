"""``Router`` and ``AsyncRouter``: many deployments as one client, each request sent to a route with
budget left, failing over to another when one fails."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Generator, Iterable, Mapping
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
    RequestOptions,
    SyncClient,
    WithRawResponse,
    WithStreamingResponse,
)
from wrapper.batch import (
    Budget,
    TargetJob,
    acomplete_with,
    afan_out_jobs,
    afan_out_with,
    complete_with,
    fan_out_with,
)
from wrapper.errors import APIError

from ._dispatch import OPTIONS, Call, Dispatch, Lane, State, routed
from ._errors import AllRoutesFailedError
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
        self._hooks: tuple[Any, ...] = ()

    @property
    def routes(self) -> tuple[Route, ...]:
        """The routes, each with its name."""
        return tuple(lane.route for lane in self._lanes)

    def with_options(self, **options: Unpack[RequestOptions]) -> Self:
        """A router with other request options, applied to each route's client (its ``with_options``),
        sharing this router's routes: their limits, cooldowns and connection pools. Closing it closes
        its copies of the clients alone, as a client's ``with_options`` copy does."""
        given: dict[str, Any] = dict(options)
        hooks = tuple(given.pop("hooks", ()))
        if hooks:
            self._lanes[0].client.with_options(hooks=hooks)  # checked as a client checks them
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

    def _batched(self, kwargs: Mapping[str, Any]) -> tuple[Self, dict[str, Any]]:
        """For ``complete_many``: this router with the batch's options, and each prompt's keywords (checked
        against every route now)."""
        params = {name: value for name, value in kwargs.items() if name not in OPTIONS}
        options = {name: value for name, value in kwargs.items() if name in OPTIONS}
        for lane in self._lanes:
            lane.route.keywords(params)
        return (self.with_options(**options) if options else self), params

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
    router closes the routes' clients.
    """

    _CLIENT = SyncClient
    _KIND = "sync"
    _OTHER = "AsyncRouter"

    def complete(self, prompt: str, **kwargs: Any) -> Completion:
        """Complete ``prompt`` on a route; ``AllRoutesFailedError`` when every route failed as many times
        as ``max_retries`` allows."""
        dispatch = self._dispatch(prompt, kwargs)
        while True:
            call = dispatch.next()
            if isinstance(call, float):
                time.sleep(call)
                continue
            if call.wait:
                time.sleep(call.wait)
            try:
                result = call.lane.client.complete(call.lane.route.model, prompt, **call.kwargs)
            except APIError as error:
                dispatch.failed(call, error)
                continue
            finally:
                dispatch.release(call)
            completion: Completion = routed(result, dispatch.served(call))
            return completion

    def stream(self, prompt: str, **kwargs: Any) -> CompletionStream:
        """The completion as it is generated, from one route; a failure before the first chunk sends the
        request to another route, never after (as a client's stream is retried until its first chunk)."""
        return CompletionStream(self._stream(self._dispatch(prompt, kwargs), prompt))

    def _stream(self, dispatch: Dispatch, prompt: str) -> Generator[Any, None, None]:
        while True:
            call = dispatch.next()
            if isinstance(call, float):
                time.sleep(call)
                continue
            if call.wait:
                time.sleep(call.wait)
            chunks: CompletionStream | None = None
            try:
                chunks = call.lane.client.stream(call.lane.route.model, prompt, **call.kwargs)
                response = chunks.open()
                break
            except APIError as error:
                _closed(dispatch, call, chunks)
                dispatch.failed(call, error)
            except BaseException:
                _closed(dispatch, call, chunks)
                raise
        name = dispatch.served(call)
        try:
            yield response
            for chunk in chunks:
                yield routed(chunk, name)
        finally:
            _closed(dispatch, call, chunks)

    def complete_many(
        self,
        prompts: Iterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        budget: Budget | None = None,
        **kwargs: Any,
    ) -> BatchIterator:
        """``complete`` for each prompt, at most ``concurrency`` in flight, each route paced to its own
        limits; as a client's ``complete_many`` otherwise (``.stats.routes`` has each route's figures)."""
        router, params = self._batched(kwargs)
        return complete_with(router.complete, prompts, concurrency=concurrency, ordered=ordered,
                             return_exceptions=return_exceptions, budget=budget, **params)  # fmt: skip

    def fan_out(
        self,
        prompts: Iterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        budget: Budget | None = None,
        **kwargs: Any,
    ) -> BatchIterator:
        """Every prompt to each route (to compare models or deployments): one result per (prompt, route),
        ``BatchResult.target`` naming the route, rather than each prompt to one route.

        Each route is paced to its own limits and retries on itself as ``max_retries`` allows; a failure is
        the route's own error. ``concurrency`` bounds the requests in flight over all routes; ``ordered``
        gives the results by prompt, then in the routes' order. ``.stats.routes`` has each route's figures.
        """
        router, params = self._batched(kwargs)
        targets = {name: functools.partial(_route_complete, one) for name, one in router._pinned().items()}
        return fan_out_with(targets, prompts, concurrency=concurrency, ordered=ordered,
                            return_exceptions=return_exceptions, budget=budget, **params)  # fmt: skip

    @property
    def with_raw_response(self) -> WithRawResponse:
        """The same calls, returning the HTTP response: ``.complete(...)`` gives a ``RawResponse``."""
        return WithRawResponse(self)

    @property
    def with_streaming_response(self) -> WithStreamingResponse:
        """``with router.with_streaming_response.stream(...) as response:``: status, headers first."""
        return WithStreamingResponse(self)

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


def _closed(dispatch: Dispatch, call: Call, chunks: CompletionStream | None) -> None:
    dispatch.release(call)
    if chunks is not None:
        chunks.close()


class AsyncRouter(RouterBase):
    """The async ``Router``, over async clients: the same methods, awaited; ``stream`` and
    ``complete_many`` are async iterators; ``await router.close()`` (or ``async with``)."""

    _CLIENT = AsyncClient
    _KIND = "async"
    _OTHER = "Router"

    async def complete(self, prompt: str, **kwargs: Any) -> Completion:
        """Complete ``prompt`` on a route (see ``Router.complete``)."""
        dispatch = self._dispatch(prompt, kwargs)
        while True:
            call = dispatch.next()
            if isinstance(call, float):
                await asyncio.sleep(call)
                continue
            if call.wait:
                await asyncio.sleep(call.wait)
            try:
                result = await call.lane.client.complete(call.lane.route.model, prompt, **call.kwargs)
            except APIError as error:
                dispatch.failed(call, error)
                continue
            finally:
                dispatch.release(call)
            completion: Completion = routed(result, dispatch.served(call))
            return completion

    def stream(self, prompt: str, **kwargs: Any) -> AsyncCompletionStream:
        """The completion as it is generated (``async for``), failing over before its first chunk only."""
        return AsyncCompletionStream(self._stream(self._dispatch(prompt, kwargs), prompt))

    async def _stream(self, dispatch: Dispatch, prompt: str) -> AsyncGenerator[Any, None]:
        while True:
            call = dispatch.next()
            if isinstance(call, float):
                await asyncio.sleep(call)
                continue
            if call.wait:
                await asyncio.sleep(call.wait)
            chunks: AsyncCompletionStream | None = None
            try:
                chunks = call.lane.client.stream(call.lane.route.model, prompt, **call.kwargs)
                response = await chunks.open()
                break
            except APIError as error:
                await _aclosed(dispatch, call, chunks)
                dispatch.failed(call, error)
            except BaseException:
                await _aclosed(dispatch, call, chunks)
                raise
        name = dispatch.served(call)
        try:
            yield response
            async for chunk in chunks:
                yield routed(chunk, name)
        finally:
            await _aclosed(dispatch, call, chunks)

    def complete_many(
        self,
        prompts: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        budget: Budget | None = None,
        **kwargs: Any,
    ) -> AsyncBatchIterator:
        """The async ``Router.complete_many``: prompts from an (async) iterable, ``async for`` the results."""
        router, params = self._batched(kwargs)
        return acomplete_with(router.complete, prompts, concurrency=concurrency, ordered=ordered,
                              return_exceptions=return_exceptions, budget=budget, **params)  # fmt: skip

    def fan_out(
        self,
        prompts: Iterable[str] | AsyncIterable[str],
        *,
        concurrency: int = 16,
        ordered: bool = False,
        return_exceptions: bool = False,
        budget: Budget | None = None,
        **kwargs: Any,
    ) -> AsyncBatchIterator:
        """The async ``Router.fan_out``: every prompt to each route, ``async for`` the results."""
        router, params = self._batched(kwargs)
        return afan_out_with(router._targets(), prompts, concurrency=concurrency, ordered=ordered,
                             return_exceptions=return_exceptions, budget=budget, **params)  # fmt: skip

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

    @property
    def with_raw_response(self) -> AsyncWithRawResponse:
        """The same calls, returning the HTTP response: ``await .complete(...)`` gives a ``RawResponse``."""
        return AsyncWithRawResponse(self)

    @property
    def with_streaming_response(self) -> AsyncWithStreamingResponse:
        """``async with router.with_streaming_response.stream(...) as response:``: status, headers first."""
        return AsyncWithStreamingResponse(self)

    async def close(self) -> None:
        """Close the routes' clients (a ``with_options`` router's: its copies of them alone)."""
        for client in self._clients():
            await client.close()

    aclose = close

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def _aclosed(dispatch: Dispatch, call: Call, chunks: AsyncCompletionStream | None) -> None:
    dispatch.release(call)
    if chunks is not None:
        await chunks.aclose()
