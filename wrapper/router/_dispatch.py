"""Where a router sends each attempt of a request: ``Dispatch``, the router's ``wrapper.Routing``.

``Lane`` is a route as a router runs it (its client: a derived router's carries its options) with the
state every router derived from the same one shares (``State``: its pacer, health and requests in
flight). ``Dispatch`` chooses a lane for each attempt of one request; the clients' attempt loop does
the rest (retries, Retry-After, backoff, the deadline), the same for the sync and async routers. Each
attempt on a route has the route's hooks (``RouteHooks``): it waits for the route's turn, and its
answer paces the route, counts in its health, and is the route's answer for ``AllRoutesFailedError``.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from wrapper import CallHooks, CallInfo, Completion, HookFactory, RetryPolicy, Routing, Target
from wrapper.errors import APIError, RateLimitError
from wrapper.pacing import (
    LimitStore,
    SharedPacer,
    await_turn,
    estimate_tokens,
    limit_for,
    used_tokens,
    wait_turn,
)

from ._errors import AllRoutesFailedError
from ._health import Health
from ._route import Route

__all__ = ["Dispatch", "Lane", "State"]

ROUTER_OPTIONS = ("max_retries", "deadline", "hooks")
"""Request options the router applies over all the routes, not each route's client."""


class State:
    """What every router derived from one shares of a route: its pacer, health and load. The pacer keeps
    the route's limits in the route's ``limit_store`` (else ``store``, the router's), if it has one;
    then its cooldowns are every process's too."""

    def __init__(self, route: Route, store: LimitStore | str | None = None) -> None:
        self.pacer = limit_for(
            route.client.API.name,
            route.client.base_url,
            route.model,
            route.requests_per_minute,
            route.tokens_per_minute,
            store=store if route.limit_store is None else route.limit_store,
            key=route.limit_key,
        )
        self.health = Health(shared=self.pacer if isinstance(self.pacer, SharedPacer) else None)
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


class RouteHooks(CallHooks):
    """The router's hooks on an attempt sent to a route: it waits for the turn booked on the route's
    pacer (no later than the call's deadline); a 429 slows that route down, another failure the retry
    policy retries counts against its health; the tokens a success used correct the pacer's estimate."""

    def __init__(
        self,
        dispatch: Dispatch,
        lane: Lane,
        turns: Iterator[float],
        first: float,
        estimate: int,
        call: CallInfo,
    ) -> None:
        super().__init__(call)
        self.dispatch = dispatch
        self.lane = lane
        self.turns = turns
        self.first = first
        self.estimate = estimate
        with dispatch.lock:
            lane.state.in_flight += 1

    def _waits(self) -> Iterator[float]:
        yield self.first
        yield from self.turns

    def before(self) -> None:
        wait_turn(self._waits(), self.call.deadline)

    async def abefore(self) -> None:
        await await_turn(self._waits(), self.call.deadline)

    def succeeded(self, completion: Completion | None) -> None:
        state = self.lane.state
        state.pacer.settle(self.estimate, used_tokens(completion, self.estimate))
        state.health.succeeded()

    def failed(self, error: APIError) -> bool:
        policy = self.dispatch.policy
        if not policy.retries(error):
            return False  # the request's fault, not the route's: the call ends with it
        self.dispatch.errors[self.lane.name] = error
        if isinstance(error, RateLimitError):
            self.lane.state.pacer.throttled(policy.retry_after(error))
            return True  # the route's pacer slows down for it
        self.lane.state.health.failed(policy.retry_after(error))
        return False

    def finished(self, error: BaseException | None) -> None:
        with self.dispatch.lock:
            self.lane.state.in_flight -= 1


class Dispatch(Routing):
    """One request's way through the lanes.

    Each pass tries every route once at most, the healthy ones first, by the earliest turn their pacers
    give, then by fewest requests in flight and fewest picked so far per unit of weight; a route cooling
    down is tried once no other is left, after its cooldown. The call's options (``max_retries``, the
    retry policy, ``deadline``) are the first route's client's with the request's on top; its other
    request options go to each route's client, and its hooks see each route's attempts
    (``CallInfo.route``). When every route has failed, ``AllRoutesFailedError`` says what each answered.
    """

    def __init__(
        self,
        lanes: Sequence[Lane],
        lock: threading.Lock,
        hooks: Sequence[HookFactory],
        prompt: str,
        kwargs: Mapping[str, Any],
    ) -> None:
        params, options = lanes[0].client.options.split(kwargs)  # ValueError for a bad option
        super().__init__(options)
        self.keywords = [lane.route.keywords(params) for lane in lanes]  # TypeError before anything is sent
        each = {
            name: value for name, value in kwargs.items() if name not in params and name not in ROUTER_OPTIONS
        }
        self.sent = [lane.client.options.merged(each) for lane in lanes]
        self.lanes = lanes
        self.lock = lock
        self.prompt = prompt
        self.hooks = (*hooks, *(kwargs.get("hooks") or ()))
        self.policy: RetryPolicy = options.retry
        self.tried: set[int] = set()
        self.errors: dict[str, APIError] = {}

    def pick(self) -> tuple[Target, float] | None:
        with self.lock:
            chosen = self._pick()
            if chosen is None:
                self.tried.clear()
                return None
            i, cooling = chosen
            lane = self.lanes[i]
            self.tried.add(i)
            lane.state.picked += 1
            estimate = self._estimate(i)
            turns = lane.state.pacer.turns(estimate)
            first = next(turns)  # booked now, so that the next request's choice sees it
        route = functools.partial(RouteHooks, self, lane, turns, first, estimate)
        options = self.sent[i].merged({"hooks": (route, *self.hooks)})
        return Target(lane.client, lane.route.model, self.keywords[i], options, lane.name), cooling

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
            weight = lane.route.weight
            return (
                max(lane.state.pacer.delay(self._estimate(i)), 0.0),
                lane.state.in_flight / weight,
                lane.state.picked / weight,
            )

        return min(ready, key=load), 0.0

    def _estimate(self, i: int) -> int:
        return estimate_tokens(self.prompt, self.keywords[i], self.lanes[i].client.API.max_tokens)

    def exhausted(self, last: APIError, attempts: int) -> APIError:
        return AllRoutesFailedError(self.errors, last, attempts)
