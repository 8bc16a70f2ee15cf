"""Leases of a shared rate limit (wrapper.ray._leases): workers spending them, on a loop of virtual time."""

from __future__ import annotations

import asyncio
import itertools
import math
import selectors
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from wrapper.pacing._pacer import BURST
from wrapper.ray._leases import LEASE, Coordinator, Grant, LeasedLimiter, Report

pytestmark = pytest.mark.filterwarnings("error")  # a coroutine never awaited, say, is a bug here


class _VirtualSelector(selectors.DefaultSelector):
    """Never waits: a select that would wait moves the loop's clock on instead."""

    def __init__(self, loop: _VirtualLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise AssertionError("deadlock: every task waits and no timer is due")
        self._loop.now += timeout
        return super().select(0)


class _VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when every task waits: hours of pacing run in moments."""

    def __init__(self) -> None:
        self.now = 1000.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self.now


def run(main: Callable[[_VirtualLoop], Coroutine[Any, Any, None]]) -> None:
    loop = _VirtualLoop()
    try:
        loop.run_until_complete(main(loop))
    finally:
        loop.close()


@dataclass
class Cluster:
    """``workers`` workers sharing one ``Coordinator``, each with ``concurrency`` tasks sending requests.

    Every request takes ``latency`` seconds; ``refuse(worker, now)`` answers a request with a 429
    (its Retry-After, or None) instead of a success. Calls to the coordinator take ``hop`` seconds.
    """

    requests_per_minute: float | None
    workers: int
    concurrency: int
    latency: float
    tokens_per_minute: float | None = None
    cost: float = 1.0
    hop: float = 0.001
    refuse: Callable[[int, float], tuple[bool, float | None]] = lambda worker, now: (False, None)
    sent: list[tuple[float, int]] = field(default_factory=list)  # (time, worker) of every request
    refused: list[tuple[float, int]] = field(default_factory=list)
    grants: list[tuple[float, int, Grant]] = field(default_factory=list)  # (time, worker, grant)
    calls: int = 0

    def simulate(self, seconds: float, *, before: Callable[[Coordinator], None] = lambda c: None) -> None:
        async def main(loop: _VirtualLoop) -> None:
            coordinator = Coordinator(
                self.requests_per_minute, self.tokens_per_minute, workers=self.workers, clock=loop.time
            )
            before(coordinator)
            until = loop.time() + seconds
            await asyncio.gather(*(self._worker(loop, coordinator, w, until) for w in range(self.workers)))

        run(main)

    async def _worker(self, loop: _VirtualLoop, coordinator: Coordinator, worker: int, until: float) -> None:
        async def ask(report: Report) -> Grant:
            self.calls += loop.time() < until  # not the calls of tasks finishing their last wait
            await asyncio.sleep(self.hop / 2)
            grant = coordinator.grant(worker, report)
            self.grants.append((loop.time(), worker, grant))
            await asyncio.sleep(self.hop / 2)
            return grant

        limiter = LeasedLimiter(ask, clock=loop.time)

        async def task() -> None:
            while loop.time() < until:
                await limiter.acquire(self.cost)
                if loop.time() >= until:
                    return
                self.sent.append((loop.time(), worker))
                await asyncio.sleep(self.latency)
                refused, retry_after = self.refuse(worker, loop.time())
                if refused:
                    self.refused.append((loop.time(), worker))
                    limiter.throttled(retry_after)
                else:
                    limiter.settle(self.cost, self.cost)

        await asyncio.gather(*(task() for _ in range(self.concurrency)))

    def times(self, worker: int | None = None) -> list[float]:
        return sorted(t for t, w in self.sent if worker is None or w == worker)


def most_over(times: list[float], per_second: float, cost: float = 1.0) -> float:
    """The most that ``times`` (each ``cost``) went over ``per_second`` in any window: the burst they needed.

    max over i <= j of ``(j - i + 1) * cost - per_second * (t_j - t_i)``, in one pass.
    """
    best, lowest = -math.inf, math.inf  # lowest: min over i <= j of (i * cost - per_second * t_i)
    for j, t in enumerate(sorted(times)):
        lowest = min(lowest, j * cost - per_second * t)
        best = max(best, (j + 1) * cost - per_second * t - lowest)
    return best


def achieved_per_minute(times: list[float]) -> float:
    return (len(times) - 1) * 60 / (times[-1] - times[0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rpm=st.floats(60, 60_000),
    workers=st.integers(1, 5),
    concurrency=st.integers(1, 12),
    latency=st.floats(0.001, 2.0),
    hop=st.floats(0.0, 0.05),
    tokens=st.one_of(st.none(), st.tuples(st.floats(600, 600_000), st.integers(1, 400))),
)
# One request costs more tokens than a short lease pays for, and workers ask a second apart: the
# leases ended before their tokens were paid, and the others booked them again (12 tokens a second
# went against a limit of 10).
@example(rpm=601.0, workers=4, concurrency=1, latency=1.0, hop=0.0, tokens=(600.0, 3))
def test_workers_together_never_send_over_the_limit_in_any_window(
    rpm: float,
    workers: int,
    concurrency: int,
    latency: float,
    hop: float,
    tokens: tuple[float, int] | None,
) -> None:
    tpm, cost = tokens if tokens else (None, 1)
    cluster = Cluster(rpm, workers, concurrency, latency, tokens_per_minute=tpm, cost=cost, hop=hop)
    cluster.simulate(20.0)
    rate = rpm / 60
    # The documented bound: the limit over the window, plus each lease's pacer allowance and one request.
    assert most_over(cluster.times(), rate) <= 2 * (BURST * rate + workers) + 1e-6
    if tpm is not None:
        token_rate = tpm / 60
        bound = 2 * (BURST * token_rate + workers * cost)
        assert most_over(cluster.times(), token_rate, cost) <= bound + 1e-6
    # No worker's lease overlaps its next one: each worker holds one lease at a time.
    for worker in range(workers):
        spans = [(t + g.delay, t + g.delay + g.duration) for t, w, g in cluster.grants if w == worker]
        assert all(b[0] >= a[0] for a, b in itertools.pairwise(spans))


def test_a_limit_a_fleet_can_exceed_is_kept_and_split_evenly() -> None:
    cluster = Cluster(6000, workers=4, concurrency=16, latency=0.2)  # each could send 80 a second
    cluster.simulate(30.0)
    times = cluster.times()
    assert achieved_per_minute(times) == pytest.approx(6000, rel=0.02)
    per_worker = Counter(w for _, w in cluster.sent)
    assert min(per_worker.values()) >= 0.9 * max(per_worker.values())
    # A lease covers ``LEASE`` seconds at a quarter of the limit: 12 requests a call, not 2 calls a request.
    assert {g.requests for _, _, g in cluster.grants if g.requests} == {math.floor(100 / 4 * LEASE)}
    assert cluster.calls <= len(times) / 10


def test_at_a_low_rate_a_lease_is_one_request_and_the_rate_is_kept_evenly() -> None:
    cluster = Cluster(300, workers=4, concurrency=8, latency=0.5)  # 5 a second: 1.25 a worker
    cluster.simulate(60.0)
    times = cluster.times()
    assert achieved_per_minute(times) == pytest.approx(300, rel=0.1)
    assert {g.requests for _, _, g in cluster.grants} <= {0, 1}  # one request, or wait for one
    assert cluster.calls <= 1.1 * len(times)  # about one call a request (a batch's turn took two)
    # As even as one process's Pacer: over any stretch, no more than its quarter second of budget
    # and one request per worker beyond the limit.
    assert most_over(times, 5) <= BURST * 5 + 4


def test_a_429_pauses_every_worker_within_one_lease() -> None:
    refused_at: list[float] = []

    def refuse(worker: int, now: float) -> tuple[bool, float | None]:
        if worker == 0 and now >= 1010.0 and not refused_at:
            refused_at.append(now)
            return True, 3.0
        return False, None

    cluster = Cluster(12_000, workers=4, concurrency=8, latency=0.05, refuse=refuse)
    cluster.simulate(20.0)
    (t429,) = refused_at
    resumed = t429 + 3.0
    # The worker that met it stops at once; every other one with its next lease, ``LEASE`` later at most.
    assert [t for t in cluster.times(0) if t429 <= t < resumed] == []
    for worker in range(1, 4):
        during = [t for t in cluster.times(worker) if t429 <= t < resumed]
        assert during
        assert max(during) <= t429 + LEASE + 2 * cluster.hop
        assert any(t >= resumed for t in cluster.times(worker))  # and all resume
    assert all(t429 + 3.0 - 1e-9 <= t for t in cluster.times() if t > t429 + LEASE + 2 * cluster.hop)


class Limited:
    """A server taking ``capacity`` requests a second across all workers, a second's worth at once,
    as the sandbox does: it refuses what goes over, saying when the request would be admitted."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.level, self.stamp = capacity, 0.0

    def __call__(self, worker: int, now: float) -> tuple[bool, float | None]:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.capacity)
        self.stamp = now
        if self.level >= 1:
            self.level -= 1
            return False, None
        return True, (1 - self.level) / self.capacity


def test_with_no_limit_given_workers_adapt_together_at_the_cost_of_a_set_limit() -> None:
    capacity = 200.0
    adaptive = Cluster(None, workers=4, concurrency=32, latency=0.05, refuse=Limited(capacity))
    adaptive.simulate(60.0)
    late = [t for t in adaptive.times() if t >= 1030.0]
    assert 0.75 * capacity * 60 <= achieved_per_minute(late) <= 1.05 * capacity * 60
    assert len(adaptive.refused) <= 0.15 * len(adaptive.sent)
    paced = Cluster(capacity * 60, workers=4, concurrency=32, latency=0.05)
    paced.simulate(60.0)
    # One call a lease either way, plus one a 429.
    assert adaptive.calls - len(adaptive.refused) <= 1.5 * paced.calls * len(adaptive.sent) / len(paced.sent)


def test_with_no_limit_given_the_cluster_opens_slowly_not_with_every_worker_at_once() -> None:
    cluster = Cluster(None, workers=4, concurrency=16, latency=0.002, refuse=Limited(20.0))
    cluster.simulate(15.0)
    start = cluster.times()[0]
    # All 64 requests at once would meet 44 429s, and more until the first cut.
    assert sum(1 for t, _ in cluster.refused if t < start + 2) < 4 * 16
    late = [t for t in cluster.times() if t >= start + 5]
    assert achieved_per_minute(late) >= 0.75 * 20 * 60


def test_with_no_limit_and_none_kept_the_cluster_has_all_its_requests_in_flight_within_a_second() -> None:
    cluster = Cluster(None, workers=4, concurrency=125, latency=1.0)
    cluster.simulate(3.0)
    times = cluster.times()
    # Each request is answered a second after it went: in flight at once are those of a second.
    full = next(t for i, t in enumerate(times) if i >= 499 and t - times[i - 499] < 1.0)
    assert full - times[0] < 1.0


def test_a_fast_limit_costs_few_calls_a_request() -> None:
    cluster = Cluster(10_000_000, workers=4, concurrency=64, latency=0.04)  # pacing never waits
    cluster.simulate(3.0)
    assert len(cluster.sent) >= 0.95 * 4 * 64 * 3.0 / 0.04
    assert cluster.calls / len(cluster.sent) <= 0.01


def test_tokens_used_beyond_the_estimates_delay_the_next_lease() -> None:
    clock = [0.0]
    coordinator = Coordinator(None, 6000, clock=lambda: clock[0])  # 100 tokens a second
    first = coordinator.grant("a", Report())
    assert first.token_rate == 100
    assert first.delay == 0
    clock[0] = 0.1
    # It sent one request estimated at 10 tokens which used 60: 0.6 s of the budget, not 0.1.
    second = coordinator.grant("a", Report(sent=1, tokens=10, corrections=50, succeeded=1))
    assert second.delay == pytest.approx(0.5)
    # That overspend is the cluster's: nobody gets tokens until it is paid for.
    clock[0] = 0.2
    other = coordinator.grant("b", Report())
    assert other.requests == 0
    assert other.duration == pytest.approx(0.4)
    # What a lease did not use goes back with the next call: at once, the other worker's share.
    clock[0] = 0.7
    renewed = coordinator.grant("a", Report(sent=1, tokens=5))
    share = coordinator.grant("b", Report())
    assert renewed.token_rate == share.token_rate == 50
    assert renewed.delay == share.delay == 0


def test_a_lease_lasts_until_the_tokens_of_the_request_waiting_for_it_are_paid() -> None:
    clock = [0.0]
    coordinator = Coordinator(None, 600, workers=2, clock=lambda: clock[0])  # 10 tokens a second
    alone = coordinator.grant("a", Report(cost=30))
    assert alone.token_rate == 10
    assert alone.duration == pytest.approx(3.0)  # not a short lease whose end others would book
    other = coordinator.grant("b", Report(cost=30))
    assert other.requests == 0
    assert other.duration == pytest.approx(3.0)  # "a" holds the limit until its request is paid


def test_a_worker_that_joins_waits_at_most_one_short_lease_for_its_share() -> None:
    clock = [0.0]
    coordinator = Coordinator(1200, None, workers=2, clock=lambda: clock[0])
    alone = coordinator.grant("a", Report())
    assert alone.request_rate == 20  # the whole limit: nobody else asked
    assert alone.duration == LEASE / 2  # but briefly, as another worker is expected
    clock[0] = 0.1
    joining = coordinator.grant("b", Report())
    assert joining.requests == 0  # "a" holds it all until its lease ends
    assert joining.duration == pytest.approx(alone.duration - 0.1)
    clock[0] = alone.duration
    renewed = coordinator.grant("a", Report(sent=int(alone.requests), succeeded=int(alone.requests)))
    clock[0] += joining.duration
    share = coordinator.grant("b", Report())
    assert renewed.request_rate == share.request_rate == 10
    assert renewed.duration == share.duration == LEASE  # both expected workers hold leases


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="requests_per_minute must be a number > 0"):
        Coordinator(0, None)
    with pytest.raises(ValueError, match="tokens_per_minute must be a number > 0"):
        Coordinator(None, -1)


def test_a_report_carries_every_429_and_the_limiter_asks_once_for_concurrent_tasks() -> None:
    reports: list[Report] = []

    async def main(loop: _VirtualLoop) -> None:
        # A limit one lease holds fifty requests of (with none, the opening's first leases hold a few).
        coordinator = Coordinator(6_000_000, None, clock=loop.time)

        async def ask(report: Report) -> Grant:
            reports.append(report)
            await asyncio.sleep(0.01)
            return coordinator.grant("w", report)

        limiter = LeasedLimiter(ask, clock=loop.time)
        await asyncio.gather(*(limiter.acquire(1) for _ in range(50)))
        assert len(reports) == 1  # one lease for all fifty
        for retry_after in [None, 2.0, 1.0]:  # three that come together
            limiter.throttled(retry_after)
        await asyncio.sleep(0.02)  # their call is on its way for 0.01 s
        limiter.throttled(None)
        await asyncio.sleep(0.005)  # while the call for it is on its way
        limiter.throttled(0.5)
        await asyncio.sleep(0.05)

    run(main)
    # Each 429 went out at once: together when they came together, in a call of its own otherwise.
    assert [r.throttles for r in reports] == [(), (None, 2.0, 1.0), (None,), (0.5,)]
    assert reports[1].sent == 50
