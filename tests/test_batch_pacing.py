"""complete_many's rate limits, adaptation to 429s, stats and request ids, on real sockets."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers import LocalServer, json_reply, scale_body

from wrapper import BatchStats
from wrapper.batch._run import acomplete_jobs
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.pacing._opening import DOUBLING, OPENING
from wrapper.pacing._pacer import BACKOFF, BURST, MIN_429S, RECOVERY, SHARE, Pacer
from wrapper.sandbox import Sandbox
from wrapper.sandbox._limits import RateLimits
from wrapper.scale import AsyncScale, Scale
from wrapper.testing import set_testing

SCALE_MODEL = "llama-3-8b-instruct"


class Arrivals:
    """A scripted reply that records when each request arrived, then answers ``reply``."""

    def __init__(self, reply: Callable[[Any], None]) -> None:
        self._reply = reply
        self._lock = threading.Lock()
        self.times: list[float] = []

    def __call__(self, handler: Any) -> None:
        with self._lock:
            self.times.append(time.monotonic())
        self._reply(handler)

    def most_in_one_second(self) -> int:
        """The most requests that arrived within any one second."""
        times = sorted(self.times)
        return max(sum(1 for t in times[i:] if t - start < 1.0) for i, start in enumerate(times))


@pytest.fixture
def scale_at(server: LocalServer) -> Iterator[Scale]:
    with Scale(api_key="k", account_id="a", base_url=server.url, timeout=10) as client:
        yield client


@pytest.mark.parametrize(
    "limits",
    [
        {"requests_per_minute": 0},
        {"requests_per_minute": -5},
        {"tokens_per_minute": "100"},
        {"tokens_per_minute": True},
        {"requests_per_minute": float("nan")},
    ],
)
async def test_bad_limits_are_refused_before_any_request(server: LocalServer, limits: dict[str, Any]) -> None:
    (name,) = limits
    with (
        Scale(api_key="k", account_id="a", base_url=server.url, timeout=10) as scale,
        pytest.raises(ValueError, match=name),
    ):
        scale.complete_many(SCALE_MODEL, ["p"], **limits)
    async with AsyncGradient(access_token="t", workspace_id="w", base_url=server.url, timeout=10) as gradient:
        with pytest.raises(ValueError, match=name):
            gradient.complete_many("m", ["p"], **limits)
    assert server.requests == []


async def test_a_limiter_and_limits_together_are_refused(server: LocalServer) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=server.url, timeout=10) as scale:
        with pytest.raises(ValueError, match="limiter"):
            acomplete_jobs(
                scale, SCALE_MODEL, iter([]), concurrency=1, ordered=False, return_exceptions=False,
                requests_per_minute=60, limiter=object(),  # type: ignore[arg-type]
            )  # fmt: skip


@pytest.mark.serial  # a rate: arrivals in any one second
def test_requests_per_minute_are_spread_evenly(server: LocalServer, scale_at: Scale) -> None:
    arrivals = Arrivals(json_reply(200, scale_body()))
    server.script(arrivals)
    results = list(scale_at.complete_many(SCALE_MODEL, ["p"] * 30, concurrency=16, requests_per_minute=600))
    assert sorted(r.index for r in results if r.ok) == list(range(30))
    # 10 a second, and never more than about a second's budget at once (30 unpaced would all go at once).
    assert arrivals.most_in_one_second() <= 10 + 3


@pytest.mark.serial  # a rate: arrivals in any one second
async def test_tokens_per_minute_are_spread_evenly_async(server: LocalServer) -> None:
    # Each request is estimated at ceil(40 / 4) + 10 = 20 tokens; the responses report 10 used.
    arrivals = Arrivals(json_reply(200, scale_body(prompt_tokens=5, response_tokens=5)))
    server.script(arrivals)
    async with AsyncScale(api_key="k", account_id="a", base_url=server.url, timeout=10) as scale:
        batch = scale.complete_many(
            SCALE_MODEL, ["x" * 40] * 30, concurrency=16, tokens_per_minute=6000, max_tokens=10
        )
        results = [r async for r in batch]
    assert all(r.ok for r in results)
    assert len(results) == 30
    busiest = arrivals.most_in_one_second()
    assert busiest <= (100 + 25 + 20) // 10  # a second's tokens, the burst, one estimate not yet corrected
    assert busiest > (100 + 25) // 20  # more than the estimates alone allow: corrected by the counts reported
    assert batch.stats.prompt_tokens == batch.stats.response_tokens == 150


def test_stats_count_what_happened(server: LocalServer, scale_at: Scale) -> None:
    set_testing(True)
    try:
        server.script(
            json_reply(429, {"detail": "slow down"}, {"retry-after-ms": "1"}),
            json_reply(503, {"detail": "busy"}),
            json_reply(400, {"detail": "bad"}),
            json_reply(200, scale_body(prompt_tokens=3, response_tokens=4), {"x-request-id": "req-9"}),
        )
        batch = scale_at.complete_many(SCALE_MODEL, ["p"] * 6, concurrency=1, return_exceptions=True)
        assert batch.stats.requests == 0
        results = list(batch)
    finally:
        set_testing(False)
    stats = batch.stats
    assert isinstance(stats, BatchStats)
    # 429 then 503 retried on the first prompt, which then gets 400; five more prompts complete.
    assert (stats.requests, stats.retries, stats.rate_limited) == (8, 2, 1)
    assert (stats.completed, stats.failed) == (5, 1)
    assert (stats.prompt_tokens, stats.response_tokens) == (15, 20)
    assert stats.elapsed > 0
    assert stats.requests_per_minute == pytest.approx(8 * 60 / stats.elapsed)
    assert stats.tokens_per_minute == pytest.approx(35 * 60 / stats.elapsed)
    assert stats.latency_p50 is not None
    assert stats.latency_p95 is not None
    assert 0 < stats.latency_p50 <= stats.latency_p95 < 10
    failed = next(r for r in results if not r.ok)
    assert failed.error is not None
    assert failed.headers["content-type"] == "application/json"
    assert failed.request_id is None


@pytest.mark.serial  # latencies measured against a 0.2 s answer
def test_latency_percentiles_come_from_the_answers(server: LocalServer, scale_at: Scale) -> None:
    slow = json_reply(200, scale_body())

    def late(handler: Any) -> None:
        time.sleep(0.2)
        slow(handler)

    server.script(*[json_reply(200, scale_body())] * 18, late, late, late)
    batch = scale_at.complete_many(SCALE_MODEL, ["p"] * 20, concurrency=1)
    list(batch)
    assert batch.stats.latency_p50 is not None
    assert batch.stats.latency_p95 is not None
    assert batch.stats.latency_p50 < 0.2 <= batch.stats.latency_p95 * 1.05  # within the histogram's 5%


def test_retries_inside_a_batch_are_logged(
    server: LocalServer, scale_at: Scale, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(json_reply(503, {"detail": "busy"}), json_reply(200, scale_body()))
    set_testing(True)
    try:
        with caplog.at_level(logging.INFO, logger="wrapper"):
            results = list(scale_at.complete_many(SCALE_MODEL, ["p"], concurrency=1))
    finally:
        set_testing(False)
    assert results[0].ok
    retried = [
        r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "retrying" in r.getMessage()
    ]
    assert len(retried) == 1
    assert "POST" in retried[0]
    assert "(retry 1 of 2)" in retried[0]
    assert "503" in retried[0]


def test_429s_cost_no_retry(server: LocalServer) -> None:
    """Twice, eight requests go at once and all are refused: the batch slows down, no prompt is lost."""
    too_many = json_reply(429, {"detail": "slow down"}, {"retry-after-ms": "10"})

    def round_of_eight() -> list[Callable[[Any], None]]:
        gate = threading.Barrier(8, timeout=5)

        def together(handler: Any) -> None:
            gate.wait()  # all eight were sent before any 429 of the round came back
            too_many(handler)

        return [together] * 8

    server.script(*round_of_eight(), *round_of_eight(), json_reply(200, scale_body()))
    with Scale(api_key="k", account_id="a", base_url=server.url, timeout=10, max_retries=1) as scale:
        batch = scale.complete_many(SCALE_MODEL, ["p"] * 8, concurrency=8, return_exceptions=True)
        results = list(batch)
    # Counting every 429 would fail all eight (two 429s each, one retry allowed).
    assert all(r.ok for r in results)
    assert (batch.stats.rate_limited, batch.stats.retries, batch.stats.requests) == (16, 16, 24)


@pytest.mark.serial  # a rate: the sandbox's per-second budget
def test_adapts_to_a_server_limit_it_was_not_told(server: LocalServer) -> None:
    with Sandbox(rpm=1200) as limited:
        with Gradient(
            access_token="t", workspace_id="w", base_url=limited.gradient_base_url, timeout=10
        ) as g:
            # 150 at the sandbox's 20 a second: seven seconds and a half, the opening and the pace after it
            batch = g.complete_many("nous-hermes2", ["p"] * 150, concurrency=32, max_generated_token_count=1)
            results = list(batch)
        sent = limited.stats()
    assert all(r.ok for r in results)
    assert len(results) == 150
    assert batch.stats.rate_limited == sent.rate_limited
    # At most the first burst, then the share below which the batch keeps probing (SHARE)
    assert sent.rate_limited <= 32 + SHARE * sent.requests


@pytest.mark.serial  # a rate: the sandbox's per-second budget
async def test_paced_to_the_servers_limit_meets_no_429(server: LocalServer) -> None:
    with Sandbox(rpm=1200) as limited:
        async with AsyncScale(
            api_key="k", account_id="a", base_url=limited.scale_base_url, timeout=10
        ) as scale:
            batch = scale.complete_many(SCALE_MODEL, ["p"] * 100, concurrency=32, requests_per_minute=1100)
            results = [r async for r in batch]
        sent = limited.stats()
    assert all(r.ok for r in results)
    assert sent.rate_limited <= 1


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _answer(
    pacer: Pacer,
    clock: Clock,
    seconds: float,
    per_second: int,
    every_nth_429: int | None,
    *,
    go: bool = False,
) -> None:
    """``per_second`` answers a second for ``seconds``, each ``every_nth_429``-th of them a 429; with
    ``go``, each of a request that went first, once its turn came (as the pacer's opening needs)."""
    for i in range(int(seconds * per_second)):
        clock.now += 1 / per_second
        for wait in pacer.turns(1) if go else ():
            clock.now += wait
        if every_nth_429 and i % every_nth_429 == 0:
            pacer.throttled(0.001)
        else:
            pacer.settle(1, 1)


def test_a_steady_few_429s_whatever_the_pace_never_slow_the_batch() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    _answer(pacer, clock, seconds=60, per_second=100, every_nth_429=int(1 / (SHARE / 2)), go=True)
    assert pacer.requests_per_minute >= 100 * 60  # never below the pace the batch went at


def test_a_flaky_servers_early_429s_never_slow_the_batch() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    _answer(pacer, clock, seconds=0.03, per_second=1000, every_nth_429=5, go=True)  # 6 of the first 30: 20%
    _answer(pacer, clock, seconds=10, per_second=1000, every_nth_429=int(1 / (SHARE / 2)), go=True)
    assert pacer.requests_per_minute >= 1000 * 60


def test_a_limit_cuts_at_most_once_a_second_to_below_what_got_through_then_recovers() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    _answer(pacer, clock, seconds=0.5, per_second=100, every_nth_429=None, go=True)  # 50 get through
    _answer(pacer, clock, seconds=0.5, per_second=100, every_nth_429=2)  # then half are refused
    first = pacer.requests_per_minute / 60
    assert BACKOFF * 50 <= first <= BACKOFF * 60 * (1 + RECOVERY)  # below what got through (INTERVAL, 1 s)
    _answer(pacer, clock, seconds=0.5, per_second=100, every_nth_429=2)
    assert pacer.requests_per_minute / 60 < first * (1 + RECOVERY)  # grown a little: no cut within a second
    _answer(pacer, clock, seconds=1.0, per_second=20, every_nth_429=2)  # still refused a second later
    second = pacer.requests_per_minute / 60
    assert first / 2 <= second <= BACKOFF * first * (1 + 2 * RECOVERY)  # cut again, by at most half
    _answer(pacer, clock, seconds=10, per_second=10, every_nth_429=None)  # the 429s stop
    assert pacer.requests_per_minute / 60 >= second * (1 + 9 * RECOVERY)  # grows back


def test_a_pause_resumes_evenly_not_in_a_burst() -> None:
    clock = Clock()
    pacer = Pacer(requests_per_minute=600, adaptive=False, clock=clock)
    pacer.throttled(1.0)
    waits = [pacer.reserve(1) for _ in range(5)]
    assert waits == pytest.approx([1.1, 1.2, 1.3, 1.4, 1.5])  # one every 0.1 s once the pause is over


def _go(pacer: Pacer, clock: Clock) -> float:
    """Take a request's turn, moving the clock through its waits: the seconds it waited."""
    start = clock.now
    for wait in pacer.turns(1):
        clock.now += wait
    return clock.now - start


def test_with_no_limit_a_pacer_opens_with_four_at_once_then_doubles_while_answers_are_clean() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    went = []
    while clock.now < 0.3:
        _go(pacer, clock)
        went.append(clock.now)
        clock.now += 0.0005  # each request answered at once, and well
        pacer.settle(1, 1)
    assert went[:4] == [0.0, 0.0005, 0.001, 0.0015]  # a quarter second at OPENING: four at once
    assert went[4] > 0.05  # then it waits: the batch is not let go at once
    per_step = [sum(1 for t in went if k * DOUBLING <= t < (k + 1) * DOUBLING) for k in range(15)]
    assert per_step[9] >= 2**3 * per_step[6] > 0  # about twice as many each step
    assert per_step[-1] == 40  # until the batch (a request at a time, 0.5 ms each) is what limits it
    assert pacer.requests_per_minute == math.inf  # and the opening is over


def test_an_opening_whose_answers_fall_behind_slows_to_what_comes_back() -> None:
    """A server that stops answering (it queues the requests) during the opening: the pacer does not
    go on at the rate it reached, blind, but falls to what came back, then to the opening's rate."""
    clock = Clock()
    pacer = Pacer(clock=clock)
    while clock.now < 0.2:  # answered at once: the rate doubles
        _go(pacer, clock)
        clock.now += 0.0005
        pacer.settle(1, 1)
    reached = pacer.requests_per_minute / 60
    assert reached >= 8 * OPENING
    went = []
    while clock.now < 0.4:  # nothing comes back any more
        _go(pacer, clock)
        went.append(clock.now)
    assert pacer.requests_per_minute / 60 == OPENING
    assert len(went) < reached * 0.2 / 4  # far fewer than the rate reached would have sent


def test_an_opening_that_meets_a_limit_measures_it_and_cuts_to_below_it() -> None:
    clock = Clock()
    server = RateLimits(rpm=1200, clock=clock)  # the sandbox's: a second's budget, 20, may go at once
    pacer = Pacer(clock=clock)
    refused = 0
    for _ in range(300):
        while True:
            _go(pacer, clock)
            clock.now += 0.002  # answered in 2 ms
            refusal = server.admit("key", 1)
            if refusal is None:
                pacer.settle(1, 1)
                break
            refused += 1
            pacer.throttled(refusal.wait)
            clock.now += refusal.wait  # the request waits the Retry-After too
    # Sending all at once meets about a 429 per request over the first second's 20; the opening
    # meets the few it needs to measure the limit, and keeps under it after.
    assert refused <= MIN_429S + 2
    assert 0.6 * 20 <= pacer.requests_per_minute / 60 <= 20 * (1 + RECOVERY * clock.now)
    assert clock.now <= 1.25 * 300 / 20


def test_an_opening_ends_once_the_batch_no_longer_waits_for_it() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    while clock.now < 0.2:  # requests queue for their turns: the rate limits the batch
        _go(pacer, clock)
    assert pacer.requests_per_minute < math.inf
    for _ in range(3):  # then they come slower than it lets them go (the concurrency limits)
        clock.now += DOUBLING * 1.5
        assert _go(pacer, clock) == 0
    assert pacer.requests_per_minute == math.inf


def test_what_a_server_takes_is_measured_from_its_429_not_from_a_burst_after_a_pause() -> None:
    """A server at 20 a second lets its burst (20) and a second's rate through, then refuses ten. The
    batch is held up (its pause, a busy machine) while the server's budget fills again; what it
    refilled then gets through at 40 a second, until it refuses again. It takes 20 a second, not 40."""
    clock = Clock()
    pacer = Pacer(clock=clock)
    for _ in range(40):
        clock.now += 0.025
        pacer.settle(1, 1)
    for _ in range(MIN_429S):
        pacer.throttled(0.05)
    clock.now += 0.45  # 9 refilled
    for _ in range(10):
        clock.now += 0.025
        pacer.settle(1, 1)
    clock.now += 0.025
    pacer.throttled(0.05)  # spent: refused again
    assert pacer.opening_step is None  # the first cut, which ends the opening
    # Timed from the first success to the last, the refilled budget passed for a rate of 40 (a cut to
    # 23, above the limit); over the time since the first 429, ten got through in 0.7 s.
    assert pacer.requests_per_minute / 60 <= BACKOFF * 20


def test_what_a_server_takes_is_measured_without_the_answers_of_requests_sent_before_it_refused() -> None:
    """The server lets 30 through at once and takes ten more already sent, then refuses; the
    successes of those ten come after its 429. Then it takes 20 a second."""
    clock = Clock()
    pacer = Pacer(clock=clock)
    for _ in range(30):
        _go(pacer, clock)
        pacer.settle(1, 1)
    for _ in range(20):  # in flight when the first 429 comes
        _go(pacer, clock)
    clock.now += 0.001
    pacer.throttled(0.001)
    for _ in range(MIN_429S - 1):  # the others: nine refused, ten let through before the first 429
        clock.now += 0.002
        pacer.throttled(0.001)
        pacer.settle(1, 1)
    pacer.settle(1, 1)
    for _ in range(10):
        clock.now += 0.05
        pacer.settle(1, 1)
    clock.now += 0.01
    pacer.throttled(0.05)
    assert pacer.opening_step is None  # the first cut, which ends the opening
    # Counting the ten sent before the 429, 38 a second got through (a cut to 30).
    assert pacer.requests_per_minute / 60 <= BACKOFF * 20


def _open_fast(pacer: Pacer, clock: Clock, until: float) -> None:
    """Requests sent one after another until ``until``, each answered at once: the opening's rate doubles."""
    while clock.now < until:
        _go(pacer, clock)
        clock.now += 0.0005
        pacer.settle(1, 1)


def _gone(waiting: list[Iterator[float]]) -> int:
    """How many of ``waiting`` go now: their turns give no more wait."""
    gone = 0
    for turns in waiting:
        try:
            while next(turns) <= 0:
                pass
        except StopIteration:
            gone += 1
    return gone


def test_a_step_of_the_opening_sends_no_more_than_its_rate_however_late_its_requests_come() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    _open_fast(pacer, clock, 0.15)
    rate, step = pacer.requests_per_minute / 60, pacer.opening_step
    assert step is not None
    assert rate * step >= 8
    waiting = [pacer.turns(1) for _ in range(200)]  # a batch's requests wait their turns
    for turns in waiting:
        next(turns)
    clock.now += BURST / 2  # held up (a busy machine): their turns came meanwhile
    # A step's worth goes, not the pacer's quarter second at this rate (62 went).
    assert _gone(waiting) <= rate * step


def test_a_step_judged_long_after_its_end_does_not_end_the_opening() -> None:
    clock = Clock()
    pacer = Pacer(clock=clock)
    _open_fast(pacer, clock, 0.1)
    step = pacer.opening_step
    assert step is not None
    clock.now += 2 * step  # nothing to send for a moment: the next request need not wait
    assert _go(pacer, clock) == 0
    clock.now += 0.0005
    pacer.settle(1, 1)
    clock.now += 0.3  # then held up (a busy machine): no request could wait for its turn, nor go
    _go(pacer, clock)
    assert pacer.opening_step is not None  # not taken for a batch its concurrency limits
    assert pacer.requests_per_minute < math.inf


def test_turns_that_went_by_while_the_caller_was_held_up_do_not_all_go_at_once() -> None:
    clock = Clock()
    pacer = Pacer(requests_per_minute=600, clock=clock)
    waiting = [pacer.turns(1) for _ in range(20)]
    assert [next(turns) for turns in waiting][-1] > 1.5
    clock.now += 1.5  # held up (a busy machine, a garbage collection): 15 of their turns went by
    went, waits = 0, []
    for turns in waiting:
        try:
            waits.append(next(turns))
        except StopIteration:
            went += 1
    # The first goes; the others book again, from now on, a tenth of a second apart (all 15 went).
    assert went == 1
    assert waits[:3] == pytest.approx([0.1, 0.2, 0.3])


@pytest.mark.parametrize("limits", [{"requests_per_minute": 600}, {"tokens_per_minute": 6000}])
def test_a_pacer_told_a_limit_opens_at_it(limits: dict[str, float]) -> None:
    clock = Clock()
    told, fixed = Pacer(**limits, clock=clock), Pacer(**limits, adaptive=False, clock=clock)
    # Ten requests at once, 10 tokens each: the slots booked are those of a pacer that never adapts.
    waits = [next(told.turns(10)) for _ in range(10)]
    assert waits == [fixed.reserve(10) for _ in range(10)]
    # A quarter second's budget (2.5 requests) at once, then ten a second.
    assert waits == pytest.approx([0, 0, 0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75])


def test_a_429_holds_back_a_request_whose_slot_was_booked_before_it() -> None:
    clock = Clock()
    pacer = Pacer(requests_per_minute=600, clock=clock)
    booked = [pacer.turns(1) for _ in range(5)]
    waits = [next(turns) for turns in booked]
    assert waits[-1] == pytest.approx(0.25)
    pacer.throttled(1.0)  # a 429 asks for a second
    clock.now += waits[-1]
    again = next(booked[-1])  # its slot came during the pause: it books one after it
    assert clock.now + again >= 1.0
    clock.now += again
    with pytest.raises(StopIteration):
        next(booked[-1])
