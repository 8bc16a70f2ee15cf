"""One rate limit for many processes, handed out in leases: one central call per lease, not per request.

A ``Coordinator`` keeps the limit (requests and tokens per minute, adapting to 429s as ``Pacer``
does) and grants each worker a lease: a rate of requests and tokens over a short window starting
now or a little later, about ``LEASE`` seconds long, or as long as one request and its tokens take
at the worker's share (it says what the request waiting for the lease costs). Leases are rectangles
on a timeline whose rates never add up to more than the limit at any instant (a lease books no
more tokens than it pays for), and a worker's fair share is the limit over the workers holding
leases, so N workers each get 1/N of it (while fewer than the workers expected hold leases, leases
are that much shorter, so that a worker who comes waits little for the others to make room). A
``LeasedLimiter`` (the batch's ``Limiter``) spends its lease evenly with its own in-process
``Pacer`` and asks for the next one when the lease runs out, reporting what it used (requests and
tokens, token corrections, successes, 429s): the unused part of the lease goes back, and its next
lease starts where its use of the last one ends. A 429 is reported at once. With no limit given,
the limit opens as a batch's does (``wrapper.pacing._opening``): while it opens, a lease lasts one of its
steps, and the 429s reported count in the step at once (a cut still waits for every worker's report).

Bounds: a fixed limit is never exceeded by the leases; the requests themselves may go up to
``BURST`` of their lease's budget early (the ``Pacer``'s allowance) and one request a lease early
from rounding, so over any window the cluster sends at most the limit for that window plus
``2 * (BURST * limit + workers)`` requests. When the limit falls (a cut after 429s) or a Retry-After
pauses it, leases already out are not recalled: every other worker keeps sending at its old rate
until its lease ends, at most ``LEASE`` seconds (one outstanding lease per worker), and then slows
down or pauses with its next one.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from wrapper.pacing import Pacer, checked_limit

__all__ = ["LEASE", "Coordinator", "Grant", "LeasedLimiter", "Report"]

LEASE = 0.5
"""Seconds a lease covers, unless one request at the worker's share takes longer."""
_ROUNDING = 1e-9  # relative: float sums of equal shares never turn a fair lease into a wait


@dataclass(frozen=True, slots=True)
class Report:
    """What a worker did since its last call, sent with its next one."""

    sent: int = 0  # requests it sent on the lease it held
    tokens: float = 0.0  # tokens those requests were charged (their estimates)
    corrections: float = 0.0  # real token counts minus estimates, of requests answered since
    succeeded: int = 0
    throttles: tuple[float | None, ...] = ()  # each 429's Retry-After (None: it gave none)
    cost: float = 0.0  # tokens of the request waiting for the next lease, which must pay for them


@dataclass(frozen=True, slots=True)
class Grant:
    """A lease as it travels: in seconds from the moment it is granted, since clocks differ by machine.

    ``requests`` 0 grants nothing: the worker asks again once ``duration`` is over.
    """

    delay: float  # until the lease starts
    duration: float
    requests: float  # at most this many requests (``inf``: no request limit)
    request_rate: float  # per second (``inf``: no limit)
    token_rate: float


@dataclass(slots=True)
class _Held:
    """A granted lease on the coordinator's clock."""

    worker: Hashable
    start: float
    end: float
    rate: float
    token_rate: float


def _seconds(amount: float, rate: float) -> float:
    """How long ``amount`` takes at ``rate`` (none of it at an unlimited rate; all of a zero one: never)."""
    if rate == math.inf or amount == 0:
        return 0.0
    return amount / rate if rate > 0 else math.inf


class Coordinator:
    """The shared limit: grants leases of it to workers and adapts it to the 429s they report.

    ``requests_per_minute``/``tokens_per_minute`` None: no limit (the request rate still adapts to
    429s, as ``Pacer``'s does). ``workers``: how many are expected to ask (while fewer hold leases,
    leases are that much shorter). Not thread-safe: one caller at a time (a Ray actor's methods are).
    """

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        *,
        workers: int = 1,
        clock: Callable[[], float] = time.monotonic,
        lease: float = LEASE,
    ) -> None:
        tpm = checked_limit("tokens_per_minute", tokens_per_minute)
        self._adapting = Pacer(requests_per_minute, tokens_per_minute, clock=clock)  # its rate only
        self._token_rate = math.inf if tpm is None else tpm / 60
        self._clock = clock
        self._lease = lease
        self._held: list[_Held] = []  # leases that may still run, each worker's newest last
        self._paused_until = -math.inf
        self._refused: list[float | None] = []  # Retry-Afters of 429s reported, not adapted to yet
        self._refused_at = -math.inf  # when the first of them was reported
        self._heard: set[Hashable] = set()  # the workers heard from since
        self._owed: dict[Hashable, float] = {}  # tokens reported when no lease could take them
        self._workers = workers

    @property
    def requests_per_minute(self) -> float:
        """The cluster's request rate now (``inf``: none), after adaptation."""
        return self._adapting.requests_per_minute

    def grant(self, worker: Hashable, report: Report) -> Grant:
        """``worker``'s next lease, once its ``report`` on the last one is counted."""
        now = self._clock()
        self._observe(worker, report, now)
        begin = max(now, self._return(worker, report), self._paused_until)
        # A worker between leases (asking for its next) still counts for a while towards the shares.
        self._held = [held for held in self._held if held.end >= now - self._lease]
        others = [held for held in self._held if held.worker != worker]
        workers = len({held.worker for held in others}) + 1
        rate = self.requests_per_minute / 60
        share, token_share = rate / workers, self._token_rate / workers
        # Fewer workers than expected (starting, or done): short leases, so that one who comes
        # waits little for the others' leases to end, which hold all the limit between them.
        lease = self._lease if workers >= self._workers else self._lease / self._workers
        step = self._adapting.opening_step  # with no limit given, the rate doubles each step at first
        if step is not None:
            lease = min(lease, step)
        # A window long enough for one request at the worker's share, and for its tokens: a lease that
        # would need longer (others hold too much of it) waits for the next of theirs to end instead.
        window = max(lease, _seconds(1, share), _seconds(report.cost, token_share))
        granted = min(share, _free(rate, others, begin, begin + window, tokens=False))
        token_rate = min(token_share, _free(self._token_rate, others, begin, begin + window, tokens=True))
        requests, duration = math.inf, lease
        if 0 < granted < math.inf:
            requests = max(1, math.floor(granted * lease))
            duration = requests / granted
        # Its tokens paid within the lease: a lease that ended before them would let others book them.
        duration = max(duration, _seconds(report.cost, token_rate))
        if granted <= 0 or token_rate <= 0 or duration > window * (1 + _ROUNDING):
            ends = [held.end for held in others if held.end > begin]
            granted = token_rate = requests = 0
            duration = min(ends, default=begin + lease) - begin
        self._held.append(_Held(worker, begin, begin + duration, granted, token_rate))
        return Grant(begin - now, duration, requests, granted, token_rate)

    def _observe(self, worker: Hashable, report: Report, now: float) -> None:
        """Adapt the rate to what the report says was sent, succeeded and refused."""
        self._adapting.observe(report.sent, report.succeeded)
        if self._refused:
            self._heard.add(worker)
        for retry_after in report.throttles:
            if not self._refused:
                self._heard, self._refused_at = {worker}, now
            self._refused.append(retry_after)
            if retry_after is not None:  # the pause at once
                self._paused_until = max(self._paused_until, now + retry_after)  # cut by the worker's policy
        # The cut waits until every worker has reported its successes of the same stretch (or one
        # lease): on the first reports alone, it would cut the rate to what their few workers achieved.
        # The opening does not wait: its step, a lease long, must know of them before it ends.
        holding = {held.worker for held in self._held if held.end >= now}
        heard = holding <= self._heard or now >= self._refused_at + self._lease
        if self._refused and (heard or self._adapting.opening_step is not None):
            for retry_after in self._refused:
                self._adapting.throttled(retry_after)
            self._refused.clear()

    def _return(self, worker: Hashable, report: Report) -> float:
        """End ``worker``'s lease where its use of it ends (the rest goes back): when its next may start."""
        tokens = report.tokens + report.corrections + self._owed.pop(worker, 0.0)
        held = next((held for held in reversed(self._held) if held.worker == worker), None)
        if held is None or (held.token_rate == 0 and tokens):  # the next lease pays for them
            self._owed[worker] = tokens
            return -math.inf if held is None else held.end
        used = max(_seconds(report.sent, held.rate), _seconds(tokens, held.token_rate))
        held.end = held.start + used  # beyond the old end when its requests overspent its tokens
        return held.end


def _free(limit: float, held: list[_Held], start: float, end: float, *, tokens: bool) -> float:
    """The rate that ``held`` leaves of ``limit`` over all of [start, end)."""
    if limit == math.inf:
        return math.inf
    overlapping = [h for h in held if h.start < end and h.end > start]
    moments = {start, *(h.start for h in overlapping if h.start > start)}
    busiest = max(
        sum(h.token_rate if tokens else h.rate for h in overlapping if h.start <= moment < h.end)
        for moment in moments
    )
    return limit - busiest


class _Lease:
    """A granted lease on the worker's clock, spent through its own ``Pacer``."""

    def __init__(self, grant: Grant, clock: Callable[[], float]) -> None:
        self.start = clock() + grant.delay
        self.end = self.start + grant.duration
        self.empty = grant.requests == 0
        self.left = grant.requests
        self.budget = grant.token_rate * grant.duration * (1 + _ROUNDING)  # tokens it may book
        self.sent = 0
        self.tokens = 0.0
        self.pacer = Pacer(
            None if self.empty or grant.request_rate == math.inf else grant.request_rate * 60,
            None if self.empty or grant.token_rate == math.inf else grant.token_rate * 60,
            adaptive=False,
            clock=clock,
        )

    def take(self, cost: float, now: float) -> float | None:
        """Book a request of ``cost`` tokens: the seconds to wait for it, or None if the lease cannot."""
        if self.left < 1 or now >= self.end or self.tokens + cost > self.budget:
            return None
        wait = self.pacer.reserve(cost)
        if now + wait >= self.end:  # booked on this lease's pacer alone, which goes with it
            return None
        self.left -= 1
        self.sent += 1
        self.tokens += cost
        return wait


class LeasedLimiter:
    """The batch's ``Limiter`` for one worker: spends leases that ``ask`` gets from a ``Coordinator``.

    ``ask`` sends a ``Report`` to the coordinator and returns its ``Grant``, as ``grant`` does.
    """

    def __init__(
        self,
        ask: Callable[[Report], Awaitable[Grant]],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._ask, self._clock, self._sleep = ask, clock, sleep
        self._lease: _Lease | None = None
        self._asking: asyncio.Future[None] | None = None  # the call for the next lease, on its way
        self._telling: asyncio.Future[None] | None = None  # the task that reports 429s
        self._corrections = 0.0
        self._succeeded = 0
        self._throttles: list[float | None] = []

    async def acquire(self, cost: float) -> None:
        """``Limiter.acquire``: wait for a slot on the lease, getting the next lease when it runs out."""
        while True:
            lease = self._lease
            if lease is not None:
                now = self._clock()
                if now < lease.start or (lease.empty and now < lease.end):
                    await self._sleep((lease.end if lease.empty else lease.start) - now)
                    continue
                wait = lease.take(cost, now)
                if wait is not None:
                    if wait > 0:
                        await self._sleep(wait)
                    return
            await self._renew(lease, cost)

    def settle(self, estimate: float, actual: float) -> None:
        """``Limiter.settle``: the correction paces this lease and goes with the next call."""
        self._succeeded += 1
        self._corrections += actual - estimate
        if self._lease is not None:
            self._lease.pacer.settle(estimate, actual)

    def throttled(self, retry_after: float | None) -> None:
        """``Limiter.throttled``: pause this worker and tell the coordinator now, which slows every worker
        (this worker's next ``acquire`` waits for its answer)."""
        self._throttles.append(retry_after)
        if self._lease is not None:
            self._lease.pacer.throttled(retry_after)
        if self._telling is None:
            self._telling = asyncio.ensure_future(self._tell())

    async def _tell(self) -> None:
        """Report the 429s heard, as soon as a call can take them (several that come together, in one)."""
        try:
            while self._throttles:
                await self._renew(None, 0.0)
        finally:
            self._telling = None

    async def _renew(self, seen: _Lease | None, cost: float) -> None:
        """Get the next lease, long enough for a request of ``cost`` tokens, unless another task is
        getting it or got it since ``seen`` was current."""
        if self._asking is None and (self._lease is seen or self._throttles):
            self._call(cost)
        if self._asking is not None:
            await asyncio.shield(self._asking)

    def _call(self, cost: float) -> None:
        """Report what was done since the last call and ask for the next lease (``_asking`` until granted)."""
        lease, self._lease = self._lease, None  # nothing more is taken from it once it is reported
        report = Report(
            sent=lease.sent if lease else 0,
            tokens=lease.tokens if lease else 0.0,
            corrections=self._corrections,
            succeeded=self._succeeded,
            throttles=tuple(self._throttles),
            cost=cost,
        )
        self._corrections, self._succeeded, self._throttles = 0.0, 0, []
        self._asking = asyncio.ensure_future(self._granted(report))

    async def _granted(self, report: Report) -> None:
        try:
            self._lease = _Lease(await self._ask(report), self._clock)
        finally:
            self._asking = None
