"""How a router sends one request: which route next, after what wait, and when to give up.

``Lane`` is a route as a router runs it (its client: a derived router's carries its options) with the
state every router derived from the same one shares (``State``: its pacer, health and requests in
flight). ``Dispatch`` is one request's way through the lanes, without I/O, so that the sync and async
routers follow it alike: ``next()`` is the next attempt (or a wait before asking again), ``failed()``
takes its error (raising what is final), ``served()`` its result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

from wrapper import CallHooks, CallInfo, Completion, CompletionChunk, RawResponse, RequestOptions, RetryPolicy
from wrapper.batch import FORGIVEN_429S
from wrapper.errors import APIError, APIStatusError, APITimeoutError, RateLimitError
from wrapper.pacing import Pacer, estimate_tokens
from wrapper.testing import is_testing

from ._errors import AllRoutesFailedError
from ._health import Health
from ._route import Route

__all__ = ["Call", "Dispatch", "Lane", "State", "routed"]

OPTIONS = frozenset(RequestOptions.__annotations__)
_OWN = ("max_retries", "deadline", "hooks")  # options the router applies itself, over all routes


class State:
    """What every router derived from one shares of a route: its pacer, health and load."""

    def __init__(self, route: Route) -> None:
        self.pacer = Pacer(route.requests_per_minute, route.tokens_per_minute)
        self.health = Health()
        self.in_flight = 0
        self.picked = 0


@dataclasses.dataclass(frozen=True)
class Lane:
    """A route as a router runs it: the route, its client (a derived router's copy) and shared state."""

    route: Route
    client: Any
    state: State

    @property
    def name(self) -> str:
        assert self.route.name is not None  # routers name every route
        return self.route.name


class _Attempt(CallHooks):
    """The router's hooks on one route call: it waits for the turn booked on the route's pacer; a 429
    slows that route down; the tokens a success used correct the pacer's estimate."""

    def __init__(
        self, state: State, turns: Iterator[float], first: float, estimate: int, call: CallInfo
    ) -> None:
        super().__init__(call)
        self.pacer = state.pacer
        self.turns = turns
        self.first = first
        self.estimate = estimate

    def _waits(self) -> Iterator[float]:
        yield self.first
        yield from self.turns

    def before(self) -> None:
        for wait in self._waits():
            if wait > 0:
                time.sleep(wait)

    async def abefore(self) -> None:
        for wait in self._waits():
            if wait > 0:
                await asyncio.sleep(wait)

    def succeeded(self, completion: Completion | None) -> None:
        used = self.estimate
        if (
            completion is not None
            and completion.prompt_tokens is not None
            and completion.response_tokens is not None
        ):
            used = completion.prompt_tokens + completion.response_tokens
        self.pacer.correct(self.estimate, used)

    def failed(self, error: APIError) -> bool:
        if isinstance(error, RateLimitError):
            self.pacer.slow_down(_retry_after(error))
        return False


def _retry_after(error: APIError) -> float | None:
    return error.retry_after if isinstance(error, APIStatusError) else None


def _on_route(name: str, factory: Any, call: CallInfo) -> CallHooks | None:
    """A hook factory of the caller's, told which route the call went to (``CallInfo.route``)."""
    hooks: CallHooks | None = factory(dataclasses.replace(call, route=name))
    return hooks


@dataclasses.dataclass
class Call:
    """One attempt: the lane, the seconds to wait first (its cooldown's end), the call's keywords."""

    lane: Lane
    wait: float
    kwargs: dict[str, Any]
    released: bool = False


def routed(result: Any, name: str) -> Any:
    """A result (a ``Completion``, a chunk, a ``RawResponse``) saying the route that served it."""
    if isinstance(result, RawResponse):
        return RawResponse(result.http_response, attrs.evolve(result.parse(), route=name))
    assert isinstance(result, Completion | CompletionChunk)
    return attrs.evolve(result, route=name)


def _waited(seconds: float) -> float:
    return 0.0 if is_testing() else seconds


class Dispatch:
    """One request's way through the lanes.

    Each pass tries every route once at most, the healthy ones first, by the earliest turn their pacers
    give, then by fewest requests in flight and fewest picked so far per unit of weight; a route cooling
    down is tried once no other is left, after its cooldown. A request error ends the request at once.
    When every route has failed in a pass, the request goes round again after the retry policy's
    backoff, ``max_retries`` times; a pass that met nothing but 429s (each route's pacer slows down for
    them) costs no retry, ``FORGIVEN_429S`` times. ``deadline`` bounds it all, as a client's call.
    """

    def __init__(
        self,
        lanes: Sequence[Lane],
        lock: threading.Lock,
        hooks: Sequence[Any],
        prompt: str,
        kwargs: Mapping[str, Any],
    ) -> None:
        params = {name: value for name, value in kwargs.items() if name not in OPTIONS}
        given = {name: value for name, value in kwargs.items() if name in OPTIONS}
        self.keywords = [lane.route.keywords(params) for lane in lanes]  # TypeError before anything is sent
        checked = {name: value for name, value in given.items() if name != "hooks"}  # the clients check hooks
        options = lanes[0].client.with_options(**checked).options if checked else lanes[0].client.options
        self.lanes = lanes
        self.lock = lock
        self.prompt = prompt
        self.hooks = [*hooks, *given.get("hooks", ())]
        self.passed = {name: value for name, value in given.items() if name not in _OWN}
        self.max_retries: int = options.max_retries
        self.policy: RetryPolicy = options.retry
        self.deadline: float | None = options.deadline
        self.started = time.monotonic()
        self.tried: set[int] = set()
        self.errors: dict[str, APIError] = {}
        self.last: APIError | None = None
        self.made = self.retries = self.forgiven = 0
        self.only_429s = True

    def left(self) -> float:
        return math.inf if self.deadline is None else self.deadline - (time.monotonic() - self.started)

    def next(self) -> Call | float:
        """The next attempt, or the seconds to wait before asking again (every route failed this pass)."""
        with self.lock:
            chosen = self._pick()
            if chosen is not None:
                return self._book(*chosen)
        delay = self._pass_over()
        self.tried.clear()
        self.only_429s = True
        return _waited(delay)

    def _pick(self) -> tuple[int, float] | None:
        """The lane to try next and its cooldown left; None when every lane was tried this pass."""
        untried = [i for i in range(len(self.lanes)) if i not in self.tried]
        if not untried:
            return None
        cooling = {i: self.lanes[i].state.health.left() for i in untried}
        ready = [i for i in untried if cooling[i] <= 0]
        if not ready:
            soonest = min(untried, key=cooling.__getitem__)
            return soonest, cooling[soonest]

        def load(i: int) -> tuple[float, float, float]:
            lane = self.lanes[i]
            cost = self._estimate(i)
            weight = lane.route.weight
            return (
                max(lane.state.pacer.delay(cost), 0.0),
                lane.state.in_flight / weight,
                lane.state.picked / weight,
            )

        return min(ready, key=load), 0.0

    def _estimate(self, i: int) -> int:
        return estimate_tokens(self.prompt, self.keywords[i], self.lanes[i].client.API.max_tokens)

    def _book(self, i: int, cooling: float) -> Call:
        left = self.left()
        if cooling >= left:  # no time to wait for its cooldown
            if self.last is not None:
                raise self._ran_out(self.last)
            cooling = 0.0  # the only route left, and nothing tried yet: try it now
        lane = self.lanes[i]
        self.tried.add(i)
        self.made += 1
        state = lane.state
        state.in_flight += 1
        state.picked += 1
        estimate = self._estimate(i)
        turns = state.pacer.turns(estimate)
        first = next(turns)  # booked now, so that the next request's choice sees it
        hooks = [
            functools.partial(_Attempt, state, turns, first, estimate),
            *(functools.partial(_on_route, lane.name, factory) for factory in self.hooks),
        ]
        kwargs = {**self.keywords[i], **self.passed, "max_retries": 0, "hooks": hooks}
        if self.deadline is not None:
            kwargs["deadline"] = max(left - cooling, 0.001)
        return Call(lane, _waited(cooling), kwargs)

    def release(self, call: Call) -> None:
        """The attempt is over (a stream's: once read or closed): one request fewer in flight on its route."""
        if not call.released:
            call.released = True
            with self.lock:
                call.lane.state.in_flight -= 1

    def failed(self, call: Call, error: APIError) -> None:
        """The attempt failed with ``error``: raised as it is when the request is at fault (a status the
        retry policy does not retry); otherwise the route's failure is counted and the request goes on."""
        if not self.policy.retries(error):
            raise error
        self.errors[call.lane.name] = self.last = error
        if not isinstance(error, RateLimitError):
            self.only_429s = False
            retry_after = _retry_after(error)
            call.lane.state.health.failed(
                None if retry_after is None else min(retry_after, self.policy.max_retry_after)
            )
        if self.left() <= 0:
            raise self._ran_out(error)

    def served(self, call: Call) -> str:
        """The attempt worked (a stream's: its first chunk came): the route's health counts it; its name."""
        call.lane.state.health.succeeded()
        return call.lane.name

    def _pass_over(self) -> float:
        """Every route failed this pass: the seconds before the next pass, or the final error raised."""
        last = self.last
        assert last is not None
        if self.only_429s and self.forgiven < FORGIVEN_429S:
            self.forgiven += 1
            return 0.0  # each route's pacer waits out its own pause
        if self.retries >= self.max_retries:
            error = AllRoutesFailedError(self.errors, last, self.made)
            error.__cause__ = last
            raise error
        delay = self.policy.backoff(self.retries, _retry_after(last))
        self.retries += 1
        if delay >= self.left():
            raise self._ran_out(last)
        return delay

    def _ran_out(self, last: APIError) -> APITimeoutError:
        timeout = APITimeoutError(
            f"the call's deadline of {self.deadline:g} s ran out after {self.made} attempt"
            f"{'s' if self.made != 1 else ''} over the routes; the last failed with: {last}",
            request=last.request,
        )
        timeout.__cause__ = last
        return timeout
