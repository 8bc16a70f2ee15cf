"""Identical requests under way at once: one leads, every other caller (any thread, any event loop)
waits for its answer, or tries again itself when the leader has none to share."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

from wrapper.cache._entry import Entry
from wrapper.cache._flight import Flight, Flights

ANSWER = Entry("complete", ({"text": "shared"},))


def test_fifty_callers_at_once_one_leads_and_all_get_its_answer() -> None:
    flights = Flights()
    claimed = threading.Barrier(50)
    leaders: list[Flight] = []

    def call() -> Entry | None:
        flight, leads = flights.claim("k")
        claimed.wait()  # every caller has claimed before the leader lands
        if leads:
            leaders.append(flight)
            flight.land(ANSWER)
            return ANSWER
        return flight.wait(timeout=30)

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda _: call(), range(50)))
    assert len(leaders) == 1
    assert results == [ANSWER] * 50
    assert flights.claim("k")[1]  # landed: the next caller leads a new flight


def test_a_leader_without_an_answer_leaves_each_waiter_to_try_again() -> None:
    flights = Flights()
    flight, leads = flights.claim("k")
    waiter, waits = flights.claim("k")
    assert leads
    assert not waits
    assert waiter is flight
    flight.land(None)
    assert waiter.wait(timeout=5) is None
    assert flights.claim("k")[1]


def test_async_waiters_of_other_loops_and_threads_get_the_answer() -> None:
    flights = Flights()
    flight, _ = flights.claim("k")
    got: list[Entry | None] = []

    def loop_waiting() -> None:
        async def waiters() -> list[Entry | None]:
            joined = [flights.claim("k") for _ in range(3)]
            assert not any(leads for _, leads in joined)
            return await asyncio.gather(*(f.await_entry() for f, _ in joined))

        got.extend(asyncio.run(waiters()))

    threads = [threading.Thread(target=loop_waiting) for _ in range(2)]
    for thread in threads:
        thread.start()
    while len(flight._waiters) < 6:  # every waiter is parked on its loop
        threading.Event().wait(0.01)
    flight.land(ANSWER)
    for thread in threads:
        thread.join(30)
    assert got == [ANSWER] * 6


async def test_a_waiter_cancelled_leaves_the_flight_to_the_others() -> None:
    flights = Flights()
    flight, _ = flights.claim("k")
    first = asyncio.ensure_future(flights.claim("k")[0].await_entry())
    second = asyncio.ensure_future(flights.claim("k")[0].await_entry())
    await asyncio.sleep(0)
    first.cancel()
    flight.land(ANSWER)
    assert await second is ANSWER
    assert first.cancelled()
