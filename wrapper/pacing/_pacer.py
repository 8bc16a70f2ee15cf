"""Client-side rate limits: requests and tokens per minute, paced evenly, slowed by 429s.

``Pacer`` spaces requests with the generic cell rate algorithm (GCRA): each quantity (requests,
tokens) has a theoretical arrival time that every request pushes ``cost / rate`` seconds further;
a request may go once that time is less than ``BURST`` seconds ahead, so at most a quarter of a
second's budget ever goes at once, never a minute's. A request costing more than ``BURST`` seconds
of budget goes once the pacer is idle and its excess is paid by the requests after it. A slot is
booked ahead, for a time: a caller that comes more than ``BURST`` after its slot (it was held up: a
busy machine, a garbage collection) voids the slots booked after it, whose requests book again,
evenly from now. Otherwise every slot that went by meanwhile would go at once, a burst the GCRA
never allows (a sync batch held up two seconds sent 35 requests at once into a server's limit).

With no limit given, the pacer opens slowly and finds the rate the server takes (``wrapper.pacing._opening``:
slow start). Then, as below the limits given, it adapts (AIMD) to a limit the server keeps but did not
announce. Every 429 pauses every request for its Retry-After (as the caller's retry policy cuts it):
the slots booked before it are booked again after it, evenly, not in a burst. The rate is cut only
when the server really refuses the pace: when 429s are at least ``SHARE`` of the answers since the
last cut (and at least ``MIN_429S`` of them), at most once per ``INTERVAL`` (or per Retry-After, if
longer), and once what gets through
is measured: ``MIN_GOT`` successes since the first 429 (or ``WINDOW`` seconds), over all the time from
that 429 to the one that cuts. A server that refuses has less than a request's budget left, so what
gets through between two 429s is what its limit refilled in between, whatever the requests' pace;
less the answers to requests in flight at the first 429 (as the opening counts them), sent before
it. (Timed from the first success to the last, as once, the budget refilled during a pause, or while
a busy caller sent nothing, got through at once and passed for the rate: a first cut above the
limit, 429s from then on too few to cut again, and 38 of them in a short batch.) A cut sets the
request rate to ``BACKOFF`` times that success rate (or the success rate since the last cut, if
lower: a server's limit lets a burst through at first), at most ``BACKOFF`` times the current rate,
at least half of it: never far below what got through. The first cut (the one that ends the opening)
has no current rate to bound it. The rate then grows back additively, by ``RECOVERY`` of the rate it
was cut to each second, up to the limit given. So a server that refuses a steady few per cent
whatever the pace (a flaky one) never drives the rate down, and one whose limit lifts is caught up
with.

Hand-written rather than aiolimiter, limits or pyrate-limiter: none of them lets a request cost more
than its burst capacity (aiolimiter's ``acquire(amount)`` raises ``ValueError``, the others refuse
it for ever), none takes back a cost once the response reports the real count, none changes its rate
while running, and aiolimiter paces asyncio tasks only, while sync batches pace threads.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from ._opening import Opening

__all__ = [
    "BURST",
    "Limiter",
    "Pacer",
    "await_turn",
    "checked_limit",
    "estimate_tokens",
    "used_tokens",
    "wait_turn",
]

BURST = 0.25
"""Seconds of budget that may go at once."""
BACKOFF = 0.8
"""A cut sets the request rate to this fraction of the success rate measured."""
RECOVERY = 0.03
"""Each second after a cut, the request rate grows by this fraction of the rate it was cut to."""
SHARE = 0.15
"""The share of 429s among the answers since the last cut above which the rate is cut."""
MIN_GOT = 10
"""Successes since the first 429 that measure the rate a server takes: no cut before them (or before
``WINDOW`` seconds). What a server had left of its budget at the two 429s, up to a request's each,
errs the measure by a tenth at most (by a fifth with five: a cut near the limit, which the
recovery soon takes past it)."""
MIN_429S = 10
"""Fewer 429s than this since the last cut never cut the rate (their Retry-After still pauses): early
in a batch, a flaky server's few random 429s can be ``SHARE`` of the few answers so far."""
INTERVAL = 1.0
"""Seconds at least between two cuts (longer when the 429's Retry-After is)."""
MIN_RATE = 1 / 60
"""Adaptation never slows below one request a minute."""
WINDOW = 2.0
"""Seconds over which the achieved success rate and the share of 429s are measured."""


class Limiter(Protocol):
    r"""Where a limit is kept, and what paces an async batch by it: the in-process ``Pacer``, or a limit
    shared by many processes (``wrapper.ray``'s leases; a store shared over the network next). Its
    words are the pacer's: a request ``acquire``\ s its turn, ``settle``\ s its token count once its
    answer reports it, and a 429 says the server ``throttled`` it."""

    async def acquire(self, cost: float) -> None:
        """Wait until a request of ``cost`` estimated tokens may go."""
        ...

    def settle(self, estimate: float, actual: float) -> None:
        """Correct a sent request's token count once its response reports the real one."""
        ...

    def throttled(self, retry_after: float | None) -> None:
        """A request got 429; the server asked for ``retry_after`` seconds (as the caller's retry policy
        cuts it), if it said."""
        ...


def checked_limit(name: str, value: object) -> float | None:
    """``value`` as a rate limit (None: no limit); ``ValueError`` naming ``name`` unless a number > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a number > 0 (or None for no limit), got {value!r}")
    return float(value)


def estimate_tokens(prompt: str, params: Mapping[str, Any], max_tokens: str) -> int:
    """A request's token cost before it is sent: ``ceil(len(prompt) / 4)`` plus its ``max_tokens`` keyword."""
    extra = params.get(max_tokens)
    if not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
        extra = 0  # absent, or invalid: ``complete`` refuses it before anything is sent
    return math.ceil(len(prompt) / 4) + extra


class _Bucket:
    """GCRA state of one quantity at ``rate`` units a second (``inf``: unlimited)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.due = -math.inf  # when everything charged so far is paid for

    def ready_at(self, cost: float) -> float:
        """The earliest time a request of ``cost`` units may go."""
        if self.rate == math.inf:
            return -math.inf
        return self.due + min(cost / self.rate, BURST) - BURST

    def charge(self, cost: float, at: float) -> None:
        if self.rate != math.inf:
            self.due = max(self.due, at) + cost / self.rate


class _Recent:
    """Events counted in ``WINDOW`` seconds, in ten fixed slots: a rate in constant memory."""

    SLOTS = 10

    def __init__(self, now: float) -> None:
        self._started = now
        self._counts = [0] * self.SLOTS
        self._slot = 0  # the absolute slot number the newest count belongs to

    def _advance(self, now: float) -> None:
        slot = int((now - self._started) / (WINDOW / self.SLOTS))
        for missed in range(self._slot + 1, min(slot, self._slot + self.SLOTS) + 1):
            self._counts[missed % self.SLOTS] = 0
        self._slot = max(self._slot, slot)

    def add(self, now: float, count: int = 1) -> None:
        self._advance(now)
        self._counts[self._slot % self.SLOTS] += count

    def count(self, now: float) -> int:
        """Events in the window."""
        self._advance(now)
        return sum(self._counts)

    def rate(self, now: float) -> float:
        """Events a second over the window, or the time since the start when shorter.

        Never over less than ``INTERVAL``: a server's limit lets a burst through at first.
        """
        self._advance(now)
        return sum(self._counts) / max(min(WINDOW, now - self._started), INTERVAL)


class _Taken:
    """Successes since ``since``, a 429: the rate a server takes once it refuses.

    Counted from the 429, not over the batch: a server's limit lets a burst through at first. Over
    all the time from it to the 429 that cuts, not from the first success to the last: a server that
    refuses has less than a request's budget left, so what gets through between two 429s is what
    its limit refilled in between, however the requests came. The budget it refilled while none
    came (a pause, a busy caller) gets through later at once, and a span that leaves that time out
    takes the burst for the rate (a cut above the limit, which the recovery then pushes further).
    The first ``owed`` answers since are left out: they answer the requests in flight at the 429,
    sent before it, and a success among them got through before the server refused.
    """

    def __init__(self, since: float, owed: int) -> None:
        self.since = since
        self.count = 0
        self._owed = owed

    def add(self, count: int, *, succeeded: bool = True) -> None:
        """``count`` more answers: successes, or 429s."""
        owed = min(count, self._owed)
        self._owed -= owed
        self.count += (count - owed) if succeeded else 0

    def rate(self, now: float) -> float:
        """Successes a second since ``since``."""
        return self.count / (now - self.since) if now > self.since else 0.0


class Pacer:
    r"""Paces requests to ``requests_per_minute`` and ``tokens_per_minute`` (None: no limit), thread-safe:
    the ``Limiter`` that keeps its limit in this process.

    A request waits for its turn: sync code waits each of ``turns`` in turn (``delay`` says how long it
    would be, booking nothing), async code awaits ``acquire``; ``reserve`` books one firm slot (a
    lease's). Its answer ``settle``\ s its token count, or says it was ``throttled`` (a 429). With
    ``adaptive`` (the default) 429s lower the request rate below the limits, and with no limit given
    the pacer opens slowly, as the module says.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        adaptive: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        rpm = checked_limit("requests_per_minute", requests_per_minute)
        tpm = checked_limit("tokens_per_minute", tokens_per_minute)
        self._clock = clock
        self._lock = threading.Lock()
        self._ceiling = math.inf if rpm is None else rpm / 60
        self._requests = _Bucket(self._ceiling)
        self._tokens = _Bucket(math.inf if tpm is None else tpm / 60)
        self._adaptive = adaptive
        self._opening = Opening(adaptive and rpm is None and tpm is None, SHARE)
        self._cut_to = math.inf  # the request rate the last 429 set, and when
        self._cut_at = -math.inf
        self._paused_until = -math.inf
        self._plan = 0  # bumped when a pause or a lower rate voids the slots ``turns`` booked
        self._firm = -math.inf  # when the slots ``reserve`` booked are paid for
        self._successes = _Recent(clock())  # since the last cut, over ``WINDOW`` at most
        self._limited = _Recent(clock())  # 429s, likewise
        self._sent = _Recent(clock())
        self._taken: _Taken | None = None  # what got through since the first 429 after the last cut

    @property
    def requests_per_minute(self) -> float:
        """The request rate the pacer keeps now (``inf``: none), after adaptation."""
        with self._lock:
            return self._rate(self._clock()) * 60

    @property
    def opening_step(self) -> float | None:
        """Seconds a step of the opening lasts (None once it is over): no rate of it holds longer."""
        with self._lock:
            return self._opening.length if self._opening.on else None

    def _rate(self, now: float) -> float:
        if self._opening.on:
            rate, fell = self._opening.rate(now)
            if fell:
                self._replan(now)
            if self._opening.on:
                return rate
        return min(self._ceiling, self._cut_to * (1.0 + RECOVERY * (now - self._cut_at)))

    def _replan(self, now: float) -> None:
        """Void the slots ``turns`` booked (their requests book again): resume evenly from now."""
        self._plan += 1
        self._requests.due = max(max(now, self._paused_until) + BURST, self._firm)

    def _next(self, cost: float, now: float) -> float:
        """When the next slot for a request of ``cost`` tokens is (booking nothing)."""
        self._requests.rate = self._rate(now)
        at = max(now, self._paused_until, self._requests.ready_at(1), self._tokens.ready_at(cost))
        return max(at, self._opening.next_step) if self._opening.full else at

    def delay(self, cost: float) -> float:
        """The seconds a request of ``cost`` estimated tokens would wait for its turn now, booking nothing
        (a router compares its routes by it)."""
        with self._lock:
            now = self._clock()
            return self._next(cost, now) - now

    def _book(self, cost: float, now: float, horizon: float) -> float:
        """The seconds until the next slot, booked unless that is over ``horizon``."""
        at = self._next(cost, now)
        if self._opening.on and at > now:
            self._opening.waited()
        if at - now <= horizon:
            self._requests.charge(1, at)
            self._tokens.charge(cost, at)
            self._sent.add(now)
        return at - now

    def reserve(self, cost: float) -> float:
        """Book a firm slot (no pause or new rate voids it) for a request of ``cost`` estimated
        tokens: the seconds to wait for it."""
        with self._lock:
            wait = self._book(cost, self._clock(), math.inf)
            self._firm = self._requests.due
            return wait

    def turns(self, cost: float) -> Iterator[float]:
        """The seconds a request of ``cost`` estimated tokens waits for its turn, in parts: wait each.

        A slot is booked at most a step of the opening ahead (the rate may double by then), and
        booked again when a 429's pause or a lower rate comes before it, or when its step of the
        opening has sent all it may (``Opening.full``) by the time it comes. A caller that comes
        more than ``BURST`` late for its slot voids those booked after it (the module says why).
        """
        while True:
            with self._lock:
                horizon = self._opening.length if self._opening.on else math.inf
                now = self._clock()
                wait, plan = self._book(cost, now, horizon), self._plan
            if wait > horizon:  # not booked: ask again once the slot is half a step away
                yield wait - horizon / 2
                continue
            yield wait
            with self._lock:
                slot, now = now + wait, self._clock()
                self._rate(now)  # the opening's step at ``now``: it may have fallen, or sent all it may
                if plan == self._plan and not self._opening.full:
                    self._went(now, 1)  # counted when it goes: a busy caller goes late
                    if now - slot > BURST:  # held up (a busy machine): the slots booked after it went by too
                        self._replan(now)  # and go evenly from now, not all at once
                    return
                if plan == self._plan:  # its step is full: the slot is given up (a new plan voided it)
                    self._requests.due -= 1 / self._requests.rate
                if self._tokens.rate != math.inf:  # and its tokens
                    self._tokens.due -= cost / self._tokens.rate

    def _went(self, now: float, count: int, *, timed: bool = True) -> None:
        self._rate(now)  # the opening's step at ``now``
        if self._opening.on:
            self._opening.went(now, count, timed=timed)

    def _answered(self, now: float, count: int, limited: bool) -> None:
        self._rate(now)
        if self._opening.on:
            for _ in range(count):
                self._opening.answered(now, limited)

    def settle(self, estimate: float, actual: float) -> None:
        """A request succeeded and used ``actual`` tokens where ``estimate`` was charged."""
        with self._lock:
            self._succeeded(self._clock(), 1)
            if self._tokens.rate != math.inf:
                self._tokens.due += (actual - estimate) / self._tokens.rate

    def _succeeded(self, now: float, count: int) -> None:
        self._successes.add(now, count)
        if self._taken is not None:
            self._taken.add(count)
        self._answered(now, count, limited=False)

    def throttled(self, retry_after: float | None) -> None:
        """A 429: pause every request for ``retry_after`` seconds and (if adaptive) maybe cut the rate."""
        with self._lock:
            now = self._clock()
            pause = 0.0 if retry_after is None else max(retry_after, 0.0)
            if now + pause > self._paused_until:
                self._paused_until = now + pause
                self._replan(now)
            if not self._adaptive:
                return
            self._answered(now, 1, limited=True)
            if self._taken is None:  # in flight now: as the opening counts them (none after it)
                self._taken = _Taken(now, self._opening.in_flight if self._opening.on else 0)
            else:
                self._taken.add(1, succeeded=False)
            self._limited.add(now)
            limited = self._limited.count(now)
            answered = limited + self._successes.count(now)
            if now - self._cut_at < max(INTERVAL, pause) or limited < max(MIN_429S, SHARE * answered):
                return
            taken = self._taken
            if taken.count < MIN_GOT and now - taken.since < WINDOW:
                return
            achieved = min(taken.rate(now), self._successes.rate(now))
            current = self._rate(now)
            if self._opening.on or current == math.inf:  # the first cut: no rate kept so far bounds it
                cut = BACKOFF * (achieved or self._sent.rate(now))
            else:
                cut = min(BACKOFF * current, max(BACKOFF * achieved, current / 2))
            self._opening.end()
            self._cut_to, self._cut_at = max(cut, MIN_RATE), now
            self._replan(now)
            self._successes, self._limited = _Recent(now), _Recent(now)
            self._taken = None

    def observe(self, sent: int, succeeded: int) -> None:
        """Count requests sent and succeeded elsewhere (a lease's report): they adapt this pacer.

        The worker reporting waits for its next lease: to the opening, a request waiting its turn.
        Reports come a lease apart, not a round trip: they time none.
        """
        with self._lock:
            now = self._clock()
            self._sent.add(now, sent)
            self._went(now, sent, timed=False)
            if self._opening.on:
                self._opening.waited()
            self._succeeded(now, succeeded)

    async def acquire(self, cost: float) -> None:
        """Wait for a slot, as ``turns`` says."""
        for wait in self.turns(cost):
            if wait > 0:
                await asyncio.sleep(wait)


def used_tokens(completion: Any, estimate: int) -> int:
    """The tokens a request used: its completion's prompt and response tokens, else ``estimate``."""
    prompt, response = (
        getattr(completion, "prompt_tokens", None),
        getattr(completion, "response_tokens", None),
    )
    return estimate if prompt is None or response is None else prompt + response


def wait_turn(
    waits: Iterable[float], deadline: float | None, sleep: Callable[[float], object] = time.sleep
) -> bool:
    """Wait each of ``waits`` (a ``Pacer.turns``) with ``sleep``, no later than ``deadline`` (on
    ``time.monotonic()``'s clock; None: none): a turn that would come after it is given up at it. True
    when ``sleep`` returned true (a sync batch's: it ended meanwhile)."""
    for wait in waits:
        late = deadline is not None and time.monotonic() + wait >= deadline
        if late:
            wait = max(deadline - time.monotonic(), 0.0)  # type: ignore[operator]
        if wait > 0 and sleep(wait):
            return True
        if late:
            return False
    return False


async def await_turn(waits: Iterable[float], deadline: float | None) -> None:
    """``wait_turn``, awaited."""
    for wait in waits:
        late = deadline is not None and time.monotonic() + wait >= deadline
        if late:
            wait = max(deadline - time.monotonic(), 0.0)  # type: ignore[operator]
        if wait > 0:
            await asyncio.sleep(wait)
        if late:
            return
