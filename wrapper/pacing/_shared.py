"""``SharedPacer``: one process's pacer of a limit kept in a ``RedisStore``, spending leases of it.

A lease is the next few requests of the limit's timeline in the store (GCRA, as ``Pacer`` keeps its
own: every booking pushes the time all bookings are paid for), with their tokens: as many as ``LEASE``
seconds of the limit over the processes sharing it, so that they take turns in small steps. The pacer
spends a lease at its requests' times (a caller late for its time by more than ``BURST`` loses it: the
leases after it are others'), and asks for the next one in the background once half of it is spent,
so requests wait on Redis only when a lease did not come in time. Each call reports what the process
did since its last: successes and their real token counts (which move the token timeline, as
``Pacer.settle`` moves its own), 429s (reported at once: their Retry-After pauses every process,
and they cut the shared rate when too many), a cooldown started, and budget booked but not spent
(given back on ``close``, or when a request costs more tokens than a lease has left).

When the store is away (a call fails or does not answer within its timeout) the pacer spends its
leases until the time every process had booked when the store last answered, then paces alone to its
share: the limit over the processes last seen with it (with no limit given, the shared rate it last
heard over them), adapting to 429s as ``Pacer`` does. It tries the store again every ``RETRY``
seconds; back, it paces alone until the leases start again: ``REJOIN`` seconds after the first
process came back after an outage every process met (when the others are back too), at once after
one of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from ._constants import LEASE, RETRY
from ._pacer import BURST, Pacer

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["HEARD", "POLL", "SharedPacer"]

POLL = 0.001
"""Seconds a request waiting for a call to the store waits before looking again."""
HEARD = 0.05
"""Seconds a pause published may come later than the same pause in an answer of the store's."""
_TURN, _WAIT, _POLL = object(), object(), object()  # what a request does next: ``SharedPacer._next``


logger = logging.getLogger("wrapper")
T = TypeVar("T")


class LeaseCalls(Protocol):
    """What a ``SharedPacer`` asks of its store (a ``RedisStore``): to run its calls, one lease each, and
    to hear how they went."""

    def submit(self, call: Callable[[], T]) -> Future[T]: ...

    def lease(self, key: str, arguments: Sequence[str]) -> list[str]: ...

    def lost_a_wait(self) -> None: ...

    def away(self, error: BaseException, pacing: str) -> None: ...

    def back(self) -> None: ...


@dataclass
class _Report:
    """What the process did since its last call, for its next."""

    since: float  # when the last call went
    sent: int = 0  # requests that took their turns
    succeeded: int = 0
    limited: int = 0
    retry_after: float | None = None
    corrections: float = 0.0
    back: float = 0.0
    back_tokens: float = 0.0
    cool: float | None = None

    def arguments(self, now: float) -> list[str]:
        """The report's part of the script's arguments."""
        return [
            str(self.sent),
            str(self.succeeded),
            repr(max(now - self.since, 0.0)),
            str(self.limited),
            "" if self.retry_after is None else repr(self.retry_after),
            repr(self.corrections),
            repr(self.back),
            repr(self.back_tokens),
            "" if self.cool is None else repr(self.cool),
        ]

    @property
    def urgent(self) -> bool:
        """Whether it must go at once: it reports a 429 or a cooldown, which slow every process down."""
        return bool(self.limited) or self.cool is not None


class _Lease:
    """Budget booked in the store, on this process's clock: ``count`` requests (0: any number) from
    ``start`` at ``rate`` a second, and ``tokens`` tokens from ``token_start`` at ``token_rate``."""

    def __init__(
        self,
        start: float,
        count: int,
        rate: float,
        token_start: float,
        tokens: float,
        token_rate: float,
        now: float,
    ) -> None:
        self.start, self.count, self.rate = start, count, rate
        self.token_start, self.tokens, self.token_rate = token_start, tokens, token_rate
        ends = [start + count / rate] if rate < math.inf else []
        ends += [token_start + tokens / token_rate] if token_rate < math.inf else []
        self.until = max(ends) if ends else now + LEASE  # when the time it books ends
        self.end = self.until + BURST if ends else self.until  # when it can serve no more
        self.taken = 0
        self.spent = 0.0
        self.over = 0.0  # tokens spent beyond ``tokens``: a first request that costs more than the lease has

    def take(self, cost: float, now: float, *, book: bool = True) -> float | None:
        """The seconds a request of ``cost`` tokens waits for its turn on this lease (booked, unless not
        ``book``), or None when the lease cannot serve it."""
        if (self.count and self.taken >= self.count) or now > self.end:
            return None
        slot, ready = self.taken, -math.inf
        if self.rate < math.inf:
            slot = max(slot, math.floor((now - BURST - self.start) * self.rate))  # turns gone by are lost
            if self.count and slot >= self.count:
                return None
            ready = self.start + slot / self.rate + min(1 / self.rate, BURST) - BURST
        spent, token_ready = self.spent, -math.inf
        if self.token_rate < math.inf:
            spent = max(spent, (now - BURST - self.token_start) * self.token_rate)
            if spent + cost > self.tokens * (1 + 1e-9) and self.taken:
                return None
            token_ready = (
                self.token_start + spent / self.token_rate + min(cost / self.token_rate, BURST) - BURST
            )
        if book:
            self.taken = slot + 1
            self.over += (
                max(spent + cost - max(self.tokens, spent), 0.0) if self.token_rate < math.inf else 0.0
            )
            self.spent = spent + cost
        return max(ready, token_ready) - now

    def skip(self, now: float) -> None:
        """Give up the turns before ``now``: a process that kept to its share did not send in them."""
        if self.rate < math.inf:
            self.taken = max(self.taken, math.ceil((now - self.start) * self.rate))
        if self.token_rate < math.inf:
            self.spent = max(self.spent, (now - self.token_start) * self.token_rate)

    def close(self) -> None:
        """Serve no more requests."""
        self.count = self.taken = max(self.taken, 1)
        self.spent = max(self.spent, self.tokens)
        self.end = -math.inf

    def low(self, now: float) -> bool:
        """Whether half of it is spent (or gone by): time to ask for the next."""
        if self.count:
            return 2 * self.taken >= self.count or (
                self.token_rate < math.inf and 2 * self.spent >= self.tokens
            )
        return now >= self.end - LEASE / 2

    def unused(self, now: float) -> tuple[float, float]:
        """Seconds of the request and token timelines it booked and will not spend from ``now`` on."""
        back = back_tokens = 0.0
        if self.rate < math.inf and self.count:
            left = self.count - max(self.taken, math.ceil((now - self.start) * self.rate))
            back = max(left, 0) / self.rate
        if self.token_rate < math.inf:
            left_tokens = self.tokens - max(self.spent, (now - self.token_start) * self.token_rate)
            back_tokens = max(left_tokens, 0.0) / self.token_rate
        return back, back_tokens


class SharedPacer:
    """``Pacer``'s methods over a limit kept in a ``RedisStore`` (``store.pacer(key, ...)`` makes it),
    thread-safe: sync code waits each of ``turns``, async code awaits ``acquire``.

    ``cool(seconds)`` starts a cooldown every process sharing the limit sees in ``cooling()``. ``close()``
    gives back the budget booked and not spent.
    """

    def __init__(
        self,
        store: LeaseCalls,
        key: str,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        adaptive: bool,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._key = store, key
        self._rpm, self._tpm, self._adaptive = requests_per_minute, tokens_per_minute, adaptive
        self._clock = clock
        self._lock = threading.Lock()
        self._limits = [
            "" if limit is None else repr(limit) for limit in (requests_per_minute, tokens_per_minute)
        ]
        self._warned = False
        self._new_process()

    def _new_process(self) -> None:
        """Start afresh (as a forked child must: its parent's leases are its parent's)."""
        self._pid = os.getpid()
        now = self._clock()
        self._leases: deque[_Lease] = deque()
        self._call: Future[None] | None = None
        self._report = _Report(now)
        self._alone: Pacer | None = None  # this process's share, while the store is away and just after
        self._primed = False  # whether its first BURST is booked
        self._horizon = -math.inf  # when the time booked on leases ends, as last heard
        self._shared_at = math.inf  # when pacing alone ends: the first lease's, once the store is back
        self._retry_at = -math.inf
        self._rate = math.inf if self._rpm is None else self._rpm / 60  # the shared request rate last heard
        self._known = 1  # the processes last seen with the limit
        self._ahead = 0.0  # seconds the limit was booked ahead when last heard
        self._booked = -math.inf  # when the time booked on this process's leases ends
        self._lookahead = LEASE  # how far ahead of now a process books (less while the limit opens)
        self._opening = False  # whether the limit is opening: then each answer is reported at once
        self._heard = now
        self._answered = False  # whether the store has answered this process yet
        self._paused_until = -math.inf
        self._plan = 0  # bumped by each pause: the turns booked before it are void
        self._cool_until = -math.inf

    def _here(self) -> float:
        """Now (the caller holds the lock), in this process: a forked child starts afresh."""
        if self._pid != os.getpid():
            self._new_process()
        return self._clock()

    @property
    def requests_per_minute(self) -> float:
        """The request rate every process sharing the limit keeps now, as last heard (``inf``: none)."""
        with self._lock:
            return self._rate * 60

    def _away(self, now: float) -> Pacer | None:
        """The pacer of this process's share while it paces alone, else None.

        Back with the store, the process paces alone until the store says leases start (``REJOIN``
        seconds after the first process came back, when every other is back too; at once if the others
        never left), then books its turns on leases again.
        """
        if self._alone is not None and now >= self._shared_at:
            self._alone = None
            self._plan += 1  # the turns booked on the share are booked again, on leases
        return self._alone

    def turns(self, cost: float) -> Iterator[float]:
        """The seconds a request of ``cost`` estimated tokens waits for its turn, in parts: wait each.

        A turn is booked on a lease, or (while the store is away) on this process's share. A pause (a
        429's Retry-After) that comes before the turn voids it, as going back to leases voids a turn on
        the share: the request books again (it waits in parts of ``BURST`` at most, to see them).
        """
        polled = False  # it waited for a call to the store
        while True:
            with self._lock:
                now = self._here()
                kind, wait = self._next(cost, now)
                plan = self._plan
                if kind is _TURN and polled and wait <= 0:  # it could have gone sooner: lost to the store
                    self._store.lost_a_wait()
            polled = polled or kind is _POLL
            if kind is not _TURN:
                yield wait
                continue
            until = now + wait
            while (left := until - self._clock()) > BURST and self._plan == plan:
                yield BURST
            if self._plan == plan:
                yield left
            with self._lock:
                if self._plan == plan:
                    return

    def _next(self, cost: float, now: float) -> tuple[object, float]:
        """What a request of ``cost`` tokens does next (the caller holds the lock): ``_TURN`` (booked: wait
        for it), or ``_WAIT``/``_POLL`` (wait, then ask again)."""
        alone = self._away(now)
        if now < self._paused_until:  # turns that go by in a pause are lost: book after it
            return _WAIT, self._paused_until - now
        if alone is not None and now >= self._horizon:
            if self._shared_at == math.inf:
                self._retry(now, cost)
            if not self._primed:  # no burst when the share starts: its first BURST is booked
                self._primed = True
                for _ in range(math.ceil(BURST * alone.requests_per_minute / 60)):
                    alone.reserve(0)
            if (delay := alone.delay(cost)) > BURST:  # booked once near, like a lease's turns
                return _WAIT, delay - BURST
            return _TURN, alone.reserve(cost)
        wait = self._take(cost, now, ask=alone is None)
        if wait is not None:
            return _TURN, wait
        if alone is not None:  # every process's leases run until then; this one's are spent
            return _WAIT, self._horizon - now
        if self._call is not None:
            return _POLL, POLL
        return _WAIT, max(self._booked - self._lookahead - now, POLL)

    def _take(self, cost: float, now: float, *, ask: bool = True) -> float | None:
        """Book a turn on the leases held (the caller holds the lock): its wait, or None if none could.
        Unless not ``ask``, the next lease is asked for when they run low and the time they book ends
        within ``lookahead``: no process books far ahead.
        """
        report = self._report
        while self._leases:
            lease = self._leases[0]
            wait = lease.take(cost, now)
            if wait is None:  # spent, gone by, or short of tokens: what is left of it goes back
                self._give_back(lease, now)
                self._leases.popleft()
                continue
            report.sent += 1
            report.corrections += lease.over
            lease.over = 0.0
            if ask and len(self._leases) == 1 and lease.low(now) and self._booked - now <= self._lookahead:
                self._ask(now, cost)
            return wait
        if ask and self._booked - now <= self._lookahead:
            self._ask(now, cost)
        return None

    def _give_back(self, lease: _Lease, now: float) -> None:
        """End ``lease`` now (the caller holds the lock): what it has not spent goes with the next report."""
        back, back_tokens = lease.unused(now)
        self._report.back += back
        self._report.back_tokens += back_tokens
        lease.close()

    def _retry(self, now: float, cost: float) -> None:
        """While the store is away: try it again, every ``RETRY`` seconds."""
        if now >= self._retry_at and self._call is None:
            self._retry_at = now + RETRY
            self._ask(now, cost)

    def _ask(self, now: float, cost: float, *, lease: bool = True) -> None:
        """Call the store in the background (the caller holds the lock), unless a call is out: report what
        the process did, and book its next lease unless not ``lease``."""
        if self._call is not None:
            return
        report, self._report = self._report, _Report(now)
        hint = "" if self._rate == math.inf else repr(self._rate)
        arguments = [
            *self._limits,
            "1" if self._adaptive else "0",
            "1" if lease else "0",
            repr(float(cost)),
            *report.arguments(now),
            hint,
            "1" if self._alone is not None else "0",
        ]
        self._call = self._store.submit(lambda: self._exchange(arguments, lease, now))

    def _exchange(self, arguments: list[str], lease: bool, asked: float) -> None:
        """One call to the store, on its thread, and what the answer (or its failure) changes."""
        try:
            answer = self._store.lease(self._key, arguments)
        except Exception as error:  # whatever went wrong, requests go on, at this process's share
            with self._lock:
                self._call = None
                pacing = self._alone_from(self._clock())
            self._store.away(error, pacing)
            return
        with self._lock:
            self._call = None
            if self._pid != os.getpid():
                return
            now = self._clock()
            mismatch = self._heard_answer(answer, lease, now, now - asked)
            if self._report.urgent or (self._opening and self._report.succeeded):
                self._ask(now, 0.0, lease=False)
        self._store.back()
        if mismatch:
            logger.warning(mismatch)

    def _heard_answer(self, answer: list[str], lease: bool, now: float, took: float) -> str | None:
        """Take in an answer of the store's, which took ``took`` seconds to come (the caller holds the
        lock); a warning to log if the limit key is given other limits by another process."""
        (
            start,
            count,
            rate,
            token_start,
            tokens,
            token_rate,
            paused,
            _,
            known,
            cool,
            ahead,
            lookahead,
            rejoin,
        ) = map(float, answer[:13])
        if paused and now + paused > self._paused_until + took:  # a pause not heard of yet
            self._paused(now, now + paused)
        for held in self._leases:  # booked at a rate since cut: what they have not spent goes back
            if rate < held.rate * (1 - 1e-9):
                self._give_back(held, now)
        if lease:
            booked = _Lease(now + start, int(count), rate, now + token_start, tokens, token_rate, now)
            self._leases.append(booked)
            self._booked = max(self._booked, booked.until)
        self._lookahead, self._opening = lookahead, answer[13] == "1"
        self._rate, self._known = rate, max(int(known), 1)
        self._cool_until = max(self._cool_until, now + cool)
        self._ahead, self._heard, self._answered = ahead, now, True
        if self._alone is not None and self._shared_at == math.inf:  # back: alone until the leases start
            self._shared_at = now + rejoin - BURST  # (their first turn is a turn's length after that)
        given = [value and float(value) for value in answer[15:17]]
        ours = [self._rpm, self._tpm]
        if self._warned or all(theirs in ("", mine) for theirs, mine in zip(given, ours, strict=True)):
            return None
        self._warned = True
        return (
            f"the limit {self._key!r} in {self._store} was given other limits by another process "
            f"(requests_per_minute={given[0] or None}, tokens_per_minute={given[1] or None}) than this one "
            f"({self._rpm}, {self._tpm}): the latest given holds"
        )

    def _alone_from(self, now: float) -> str:
        """Pace alone from now on (the caller holds the lock): this process's share, described for the log.

        The share starts once the time booked on leases when the store last answered has gone by; until
        then, the process spends its own leases.
        """
        self._shared_at = math.inf
        self._retry_at = now + RETRY
        known = self._known
        rpm = self._rpm if self._rpm is not None else (None if self._rate == math.inf else self._rate * 60)
        shares = [None if limit is None else limit / known for limit in (rpm, self._tpm)]
        if self._alone is None:
            self._alone = Pacer(*shares, adaptive=self._adaptive)
            self._primed = False
        # Every process's leases run until the time booked when the store last answered: this one's are
        # spent until then, and the share starts then.
        self._horizon = self._heard + self._ahead
        self._report = _Report(now)  # what happens alone is not the shared limit's
        described = ", ".join(
            f"{share:g} {unit}/min"
            for share, unit in zip(shares, ("requests", "tokens"), strict=True)
            if share
        )
        return f"{described or 'no limit'} for {self._key!r}, 1/{known} of it"

    def delay(self, cost: float) -> float:
        """The seconds a request of ``cost`` estimated tokens would wait for its turn now, booking nothing."""
        with self._lock:
            now = self._here()
            alone = self._away(now)
            paused = self._paused_until - now
            if alone is not None and now >= self._horizon:
                return max(alone.delay(cost), paused)
            for lease in self._leases:
                wait = lease.take(cost, now, book=False)
                if wait is not None:
                    return max(wait, paused)
            # the time booked on leases when last heard (while alone, until the horizon)
            return max((self._horizon if alone is not None else self._heard + self._ahead) - now, paused, 0.0)

    def settle(self, estimate: float, actual: float) -> None:
        """A request succeeded and used ``actual`` tokens where ``estimate`` was charged."""
        with self._lock:
            now = self._here()
            alone = self._away(now)
            if alone is None:
                self._report.succeeded += 1
                self._report.corrections += actual - estimate
                if self._opening:  # its steps are judged by their answers
                    self._ask(now, 0.0, lease=False)
            else:
                alone.settle(estimate, actual)

    def throttled(self, retry_after: float | None) -> None:
        """A 429: every process pauses for ``retry_after`` seconds (this one at once, the others with their
        next lease), and the shared rate is cut if 429s are too many."""
        with self._lock:
            now = self._here()
            pause = 0.0 if retry_after is None else max(retry_after, 0.0)
            self._paused(now, now + pause)
            alone = self._away(now)
            if alone is None or self._shared_at < math.inf:  # the store answers: the others hear of it
                report = self._report
                report.limited += 1
                if retry_after is not None:
                    report.retry_after = max(report.retry_after or 0.0, retry_after)
                self._ask(now, 0.0, lease=False)
        if alone is not None:
            alone.throttled(retry_after)

    def pause(self, seconds: float) -> None:
        """Another process sharing the limit met a 429: pause for its Retry-After."""
        with self._lock:
            now = self._here()
            if now + seconds > self._paused_until + HEARD:  # not heard of already, from the store's answer
                self._paused(now, now + seconds)

    def _paused(self, now: float, until: float) -> None:
        """Pause until ``until`` (the caller holds the lock), if later than the pause so far: the leases
        held are void (the store starts the timeline again after the pause, as every process hears at
        once), and the turns booked on them are booked again after it."""
        if until > self._paused_until:
            self._paused_until = until
            self._plan += 1
            self._leases.clear()
            self._booked = -math.inf

    def cool(self, seconds: float) -> None:
        """Start a cooldown of ``seconds`` that every process sharing the limit sees."""
        with self._lock:
            now = self._here()
            self._cool_until = max(self._cool_until, now + seconds)
            if self._away(now) is None:
                self._report.cool = max(self._report.cool or 0.0, seconds)
                self._ask(now, 0.0, lease=False)

    def cooling(self) -> float:
        """Seconds left of the cooldown a process sharing the limit started (0: none).

        The store is asked again when last heard over a lease ago (a route cooling down sends nothing,
        so hears of nothing otherwise); before its first answer, the answer is waited for (a lease's
        length at most), so that a process that starts sees a cooldown under way.
        """
        with self._lock:
            now = self._here()
            if self._away(now) is None and (not self._answered or now - self._heard > LEASE):
                self._ask(now, 0.0, lease=False)
            call = None if self._answered else self._call
        if call is not None:
            with contextlib.suppress(Exception):  # slow or away: the store's fallback says so
                call.result(timeout=LEASE)
        with self._lock:
            return max(self._cool_until - self._here(), 0.0)

    def close(self) -> None:
        """Give back what the leases held have not spent (waiting up to the store's timeout for it)."""
        with self._lock:
            call = self._call
        if call is not None:  # a lease on its way: give it back too
            call.result()
        with self._lock:
            now = self._here()
            for lease in self._leases:
                self._give_back(lease, now)
            self._leases.clear()
            if self._away(now) is not None or not (self._report.back or self._report.back_tokens):
                return
            self._ask(now, 0.0, lease=False)
            call = self._call
        if call is not None:
            call.result()

    async def acquire(self, cost: float) -> None:
        """``Limiter.acquire``: wait for a turn, as ``turns`` says."""
        for wait in self.turns(cost):
            if wait > 0:
                await asyncio.sleep(wait)

    def __repr__(self) -> str:
        return f"SharedPacer({self._key!r} in {self._store})"
