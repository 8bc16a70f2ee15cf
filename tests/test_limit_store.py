"""The limit stores: ``LocalStore`` in this process, ``RedisStore`` in a real ``redis-server``, shared by
processes that name one limit key (each ``RedisStore`` made from a URL is a process of its own to the
others: its identity among them is its own). A request's turn is waited for as requests
wait for theirs (``next_turn``), which says how long it planned to wait."""

from __future__ import annotations

import logging
import os
import pickle
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator

import pytest
import redis
from redis_server import RedisServer

from wrapper.pacing import LocalStore, Pacer, RedisStore, SharedPacer, limit_key, limit_store
from wrapper.pacing._constants import LEASE, RETRY
from wrapper.pacing._pacer import WINDOW
from wrapper.pacing._redis import TIMEOUT
from wrapper.pacing._shared import BURST, POLL

KEY = "scale api.example llama"
MARGIN = 0.05
"""Seconds a turn's time may be early by, as measured here: from after the turn it follows."""


def next_turn(pacer: object, cost: float = 1.0) -> float:
    """Wait for ``pacer``'s next turn, as a request does: the seconds it planned to wait (the waits for
    the store's answers left out, whose length is the machine's, not the limit's)."""
    planned = 0.0
    for wait in pacer.turns(cost):  # type: ignore[attr-defined]
        time.sleep(max(wait, 0.0))
        planned += wait if wait != POLL else 0.0
    return planned


@pytest.fixture
def stores(redis_url: str) -> Iterator[Callable[[], RedisStore]]:
    """Makes stores of the test's server, each a process of its own among them; closed after the test."""
    made: list[RedisStore] = []

    def make() -> RedisStore:
        made.append(RedisStore(redis_url))
        return made[-1]

    yield make
    for store in made:
        store.close()


def test_processes_naming_one_limit_take_their_turns_one_after_another(
    stores: Callable[[], RedisStore],
) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=600) for _ in range(2))
    assert next_turn(first) <= 0
    first_went = time.monotonic()
    # the first was alone: its lease is LEASE seconds of the whole limit, and the second's comes after it
    next_turn(second)
    assert time.monotonic() - first_went >= LEASE - BURST + 1 / 10 - MARGIN
    assert next_turn(stores().pacer("another deployment", requests_per_minute=600)) <= 0


def test_what_a_process_booked_and_did_not_spend_goes_back(stores: Callable[[], RedisStore]) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=600) for _ in range(2))
    assert next_turn(first) <= 0
    first.close()  # one request of the lease's five went: the other four are given back
    assert next_turn(second) <= 0


def test_a_429_pauses_every_process_for_its_retry_after(stores: Callable[[], RedisStore]) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=60_000) for _ in range(2))
    next_turn(first)
    first.throttled(2.0)
    refused = time.monotonic()
    first.close()  # waits for the report to reach the store
    assert next_turn(second) <= 2.0
    assert time.monotonic() - refused >= 2.0 - MARGIN


def test_a_429_pauses_the_others_at_once_not_with_their_next_lease(stores: Callable[[], RedisStore]) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=60_000) for _ in range(2))
    next_turn(first)
    next_turn(second)  # a lease of hundreds of turns: it calls the store again much later
    first.throttled(2.0)
    refused = time.monotonic()
    time.sleep(0.1)
    assert next_turn(second) <= 2.0
    assert time.monotonic() - refused >= 2.0 - MARGIN


def test_429s_cut_the_shared_rate_for_everybody_and_a_restarted_store_keeps_it(
    stores: Callable[[], RedisStore], redis_url: str
) -> None:
    first = stores().pacer(KEY, requests_per_minute=600)
    next_turn(first)
    for count, then in ((1, WINDOW / 2), (9, WINDOW / 2 + 0.05)):  # 10 429s, nothing through: cut by half
        for _ in range(count):
            first.throttled(None)
        time.sleep(then)
    first.throttled(None)
    first.close()
    second = stores().pacer(KEY, requests_per_minute=600)
    next_turn(second)
    assert second.requests_per_minute == pytest.approx(300, rel=0.05)
    redis.Redis.from_url(redis_url).flushall()  # a store restarted without its data
    next_turn(first)  # the first after it tells the rate it kept
    third = stores().pacer(KEY, requests_per_minute=600)
    next_turn(third)
    assert third.requests_per_minute == pytest.approx(300, rel=0.05)


def test_a_cooldown_one_process_starts_is_every_process_s(stores: Callable[[], RedisStore]) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=600) for _ in range(2))
    next_turn(first)
    assert first.cooling() == 0
    first.cool(3.0)
    first.close()
    next_turn(second)
    assert 2.5 <= second.cooling() <= 3.0


def test_store_time_is_the_only_time_processes_compare(stores: Callable[[], RedisStore]) -> None:
    first = stores().pacer(KEY, requests_per_minute=600)
    far = SharedPacer(stores(), KEY, 600, None, True, clock=lambda: time.monotonic() + 86_400 * 365)
    assert next_turn(first) <= 0
    first_went = time.monotonic()
    next_turn(far)
    assert time.monotonic() - first_went >= LEASE - BURST + 1 / 10 - MARGIN


def test_a_killed_process_leaves_the_limit_to_the_others_within_the_time_it_had_booked(
    redis_url: str, stores: Callable[[], RedisStore]
) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, KEY], stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        booked = float(child.stdout.readline())  # seconds of the limit it holds from now on
        told = time.monotonic()
        child.send_signal(signal.SIGKILL)
    assert 0 < booked <= 2 * LEASE  # a lease, and the next one asked for before the first runs out
    assert next_turn(stores().pacer(KEY, requests_per_minute=600)) <= booked
    assert time.monotonic() - told >= booked - 2 * BURST - MARGIN


CHILD = """
import sys, time
from wrapper.pacing import RedisStore
pacer = RedisStore(sys.argv[1]).pacer(sys.argv[2], requests_per_minute=600)
for _ in range(3):  # three turns of its five: it asks for its next lease
    waits = pacer.turns(1)
    wait = next(waits)
    for wait in waits:
        time.sleep(0.001)
time.sleep(0.2)
print(max(lease.until for lease in pacer._leases) - time.monotonic(), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("outage", ["stopped", "frozen"])
def test_with_the_store_away_a_process_paces_to_its_share_and_says_so_once(
    stores: Callable[[], RedisStore],
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
    outage: str,
) -> None:
    first, second = (stores().pacer(KEY, requests_per_minute=600) for _ in range(2))
    next_turn(first)
    next_turn(second)
    first.close()  # and hears of the second: its share is half of the limit
    if outage == "stopped":
        redis_server.stop()
    else:
        redis_server.pause()
    try:
        with caplog.at_level(logging.WARNING, logger="wrapper"):
            next_turn(first)
            four = sum(next_turn(first) for _ in range(4))  # at the share: four times 60 / 300 s
            time.sleep(RETRY)
            next_turn(first)  # tries the store again: away still
    finally:
        if outage == "stopped":
            redis_server.start()
        else:
            redis_server.resume()
    assert four == pytest.approx(4 * 60 / 300, abs=0.05)  # 300/min: half of 600
    away = [r.getMessage() for r in caplog.records if "is away" in r.getMessage()]
    assert len(away) == 1, away
    assert "300 requests/min for " in away[0]
    assert ("TimeoutError" if outage == "frozen" else "ConnectionError") in away[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="wrapper"):
        time.sleep(RETRY)
        for _ in range(3):
            next_turn(first)
        time.sleep(0.1)
    assert [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()] != []


def test_a_slow_store_counts_as_away_after_its_timeout(
    stores: Callable[[], RedisStore], redis_server: RedisServer
) -> None:
    pacer = stores().pacer(KEY, requests_per_minute=600)
    redis_server.pause()
    try:
        started = time.monotonic()
        next_turn(pacer)
        waited = time.monotonic() - started
    finally:
        redis_server.resume()
    assert TIMEOUT <= waited <= TIMEOUT + 1.0


def test_every_lease_is_one_round_trip(stores: Callable[[], RedisStore], redis_url: str) -> None:
    server = redis.Redis.from_url(redis_url)
    server.config_resetstat()
    store = stores()
    pacer = store.pacer(KEY, requests_per_minute=60_000)
    for _ in range(200):
        next_turn(pacer)
    calls = server.info("commandstats")["cmdstat_evalsha"]["calls"]
    assert calls == store.round_trips
    assert store.round_trips <= 200 / 50  # leases of LEASE seconds of 1,000 requests a second


def test_the_store_keeps_a_limit_under_its_key_for_a_while_in_one_cluster_slot(
    stores: Callable[[], RedisStore], redis_url: str
) -> None:
    next_turn(stores().pacer(KEY, requests_per_minute=600))
    server = redis.Redis.from_url(redis_url)
    keys = sorted(key.decode() for key in server.keys("*"))
    assert keys == [f"completion-clients:limit:{{{KEY}}}", f"completion-clients:limit:{{{KEY}}}:processes"]
    assert all(0 < server.pttl(key) <= 600_000 for key in keys)


def test_other_limits_for_one_key_are_logged(
    stores: Callable[[], RedisStore], caplog: pytest.LogCaptureFixture
) -> None:
    next_turn(stores().pacer(KEY, requests_per_minute=600))
    with caplog.at_level(logging.WARNING, logger="wrapper"):
        pacer = stores().pacer(KEY, requests_per_minute=1200)
        next_turn(pacer)
        pacer.close()
    [record] = [r for r in caplog.records if "other limits" in r.getMessage()]
    assert "requests_per_minute=600.0" in record.getMessage()


def test_a_forked_child_is_a_process_of_its_own(stores: Callable[[], RedisStore]) -> None:
    store = stores()
    pacer = store.pacer(KEY, requests_per_minute=600)
    assert next_turn(pacer) <= 0
    went = time.monotonic()
    parent = store.process
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the store's threads: the child has none
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        next_turn(pacer)  # after the parent's lease
        ok = store.process != parent and time.monotonic() - went >= LEASE - BURST + 1 / 10 - MARGIN
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_store_is_given_by_url_or_as_a_store(redis_url: str) -> None:
    assert limit_store(None) is None
    store = limit_store(redis_url)
    assert isinstance(store, RedisStore)
    assert limit_store(redis_url) is store  # one per URL in a process
    assert pickle.loads(pickle.dumps(store)) is store  # sent to another process as its URL
    local = LocalStore()
    assert limit_store(local) is local
    assert local.pacer(KEY, 600) is local.pacer(KEY, 600)
    assert local.pacer(KEY, 600) is not local.pacer(KEY, 1200)
    assert isinstance(local.pacer(KEY), Pacer)
    client = redis.Redis.from_url(redis_url)
    with pytest.raises(TypeError, match="give its URL"):
        pickle.dumps(RedisStore(client))
    assert limit_key("scale", "https://api.example/v4/", "llama") == KEY


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("http://user:secret@redis.example:6379", ValueError, "limit_store must be a Redis URL"),
        ("localhost:6379", ValueError, "limit_store must be a Redis URL"),
        (42, TypeError, "limit_store must be a Redis URL .* got int"),
    ],
)
def test_a_bad_store_is_refused_naming_limit_store(
    value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        limit_store(value)
    assert "secret" not in str(raised.value)


def test_bad_keys_limits_and_prefixes_are_refused(redis_url: str) -> None:
    store = limit_store(redis_url)
    assert store is not None
    with pytest.raises(ValueError, match="limit_key must be a non-empty string"):
        store.pacer("  ")
    with pytest.raises(ValueError, match="requests_per_minute must be a number > 0"):
        store.pacer(KEY, requests_per_minute=-1)
    with pytest.raises(ValueError, match="prefix must be a non-empty string"):
        RedisStore(redis_url, prefix="")
    with pytest.raises(TypeError, match=r"a redis:// URL or a redis\.Redis client"):
        RedisStore(42)  # type: ignore[arg-type]
