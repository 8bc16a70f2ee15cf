"""``Retry-After`` and ``retry-after-ms`` as servers send them, readable or not, through the public
clients on a loopback server (sync, and async on each transport): a value that cannot be read or is
out of range is ignored and the backoff applies; nothing but the typed error ever escapes."""

from __future__ import annotations

import math
from typing import Any

import pytest
from helpers import LocalServer, call, json_reply, scale_body
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from wrapper import RetryPolicy
from wrapper.errors import RateLimitError

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

BACKOFF = RetryPolicy()
FIRST_BACKOFF = (BACKOFF.initial_backoff * (1 - BACKOFF.jitter), BACKOFF.initial_backoff)
"""The range of the wait before a first retry when the server's value is ignored."""
SLOW_DOWN = {"detail": "slow down"}


def backed_off(sleeps: list[float]) -> bool:
    """Whether the one retry waited a first backoff."""
    return len(sleeps) == 1 and FIRST_BACKOFF[0] <= sleeps[0] <= FIRST_BACKOFF[1]


UNREADABLE = {
    "a year no clock holds": "Fri, 31 Dec 99999999999999999999 23:59:59 GMT",
    "an absurd zone offset": "Fri, 31 Dec 2027 23:59:59 +99999999999999999999",
    "an hour past any clock": "Fri, 31 Dec 2027 99999999999:59:59 GMT",
    "the year 10000": "Sat, 01 Jan 10000 00:00:00 GMT",
    "a zone offset over a day": "Fri, 31 Dec 2027 23:59:59 +9999",
    "negative seconds": "-5",
    "infinite seconds": "1e400",
    "not a number": "nan",
    "words": "in a while",
}


@pytest.mark.parametrize("value", list(UNREADABLE.values()), ids=list(UNREADABLE))
async def test_an_unreadable_retry_after_leaves_the_backoff(
    make_client: Any, lane: str, server: LocalServer, sleeps: list[float], value: str
) -> None:
    server.script(json_reply(429, SLOW_DOWN, {"retry-after": value}), json_reply(200, scale_body("ok")))
    client = make_client("scale", lane, base_url=server.url)
    assert (await call(client.complete("m", "p"))).text == "ok"
    assert backed_off(sleeps)


@pytest.mark.parametrize("value", list(UNREADABLE.values()), ids=list(UNREADABLE))
async def test_an_unreadable_retry_after_is_none_on_the_error(
    make_client: Any, lane: str, server: LocalServer, value: str
) -> None:
    server.script(json_reply(429, SLOW_DOWN, {"retry-after": value, "retry-after-ms": value}))
    client = make_client("scale", lane, base_url=server.url, max_retries=0)
    with pytest.raises(RateLimitError) as caught:
        await call(client.complete("m", "p"))
    assert caught.value.retry_after is None


async def test_a_batch_keeps_going_past_unreadable_retry_afters(
    make_client: Any, lane: str, server: LocalServer
) -> None:
    date = UNREADABLE["an absurd zone offset"]
    server.script(*[json_reply(200, scale_body("ok"))] * 3, json_reply(429, SLOW_DOWN, {"retry-after": date}))
    client = make_client("scale", lane, base_url=server.url, max_retries=0)
    batch = client.complete_many("m", [f"p{i}" for i in range(6)], concurrency=1, return_exceptions=True)
    results = [result async for result in batch] if hasattr(batch, "__aiter__") else list(batch)
    assert sorted(result.index for result in results) == list(range(6))
    assert [result.ok for result in sorted(results, key=lambda r: r.index)] == [True] * 3 + [False] * 3
    assert all(isinstance(r.error, RateLimitError) and r.error.retry_after is None for r in results[3:])


async def test_a_readable_date_is_waited_for(
    make_client: Any, lane: str, server: LocalServer, sleeps: list[float]
) -> None:
    soon = "Fri, 31 Dec 9999 23:59:59 GMT"  # far off, but a date: cut to max_retry_after
    server.script(json_reply(429, SLOW_DOWN, {"retry-after": soon}), json_reply(200, scale_body("ok")))
    client = make_client("scale", lane, base_url=server.url, retry=RetryPolicy(max_retry_after=7.0))
    assert (await call(client.complete("m", "p"))).text == "ok"
    assert sleeps == [7.0]


# --- any value a server might send --------------------------------------------------------------------

DAYS = st.sampled_from(["Mon", "Fri", "Sun", "Xyz", ""])
MONTHS = st.sampled_from(["Jan", "Dec", "Feb", "Foo"])
HUGE = st.integers(0, 10**25)
ZONES = st.sampled_from(["GMT", "UT", "UTC", "EST", "Z", "-0000", "+0000"]) | st.builds(
    "{}{:04d}".format, st.sampled_from("+-"), st.integers(0, 10**24)
)
DATES = st.builds(
    "{}, {} {} {} {}:{:02d}:{:02d} {}".format,
    DAYS,
    st.integers(0, 10**6),
    MONTHS,
    HUGE,
    st.integers(0, 10**12),
    st.integers(0, 99),
    st.integers(0, 99),
    ZONES,
)
NUMBERS = (
    st.floats().map(repr)
    | st.integers(-(10**30), 10**30).map(str)
    | st.sampled_from(["1e400", "-0", "0x10", "1_000", " 5", "Infinity"])
)
TEXT = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40)
VALUES = (DATES | NUMBERS | TEXT).map(str.strip).filter(bool)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(retry_after=VALUES, retry_after_ms=st.none() | NUMBERS | TEXT)
@example(retry_after=UNREADABLE["an absurd zone offset"], retry_after_ms=None)
@example(retry_after="Sun, 06 Nov 1994 08:49:37 GMT", retry_after_ms="1e309")
async def test_any_retry_after_gives_the_typed_error_and_a_wait_in_range(
    make_client: Any,
    lane: str,
    server: LocalServer,
    sleeps: list[float],
    retry_after: str,
    retry_after_ms: str | None,
) -> None:
    headers = {"retry-after": retry_after}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = retry_after_ms.strip() or "x"
    server.script(json_reply(429, SLOW_DOWN, headers))
    client = make_client("scale", lane, base_url=server.url, max_retries=0)
    with pytest.raises(RateLimitError) as caught:
        await call(client.complete("m", "p"))
    seconds = caught.value.retry_after
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0), seconds

    sleeps.clear()
    server.script(json_reply(429, SLOW_DOWN, headers), json_reply(200, scale_body("ok")))
    assert (await call(client.with_options(max_retries=1).complete("m", "p"))).text == "ok"
    if seconds is None:
        assert backed_off(sleeps), sleeps
    else:  # a date is read against the clock again: a second may have passed
        assert len(sleeps) == 1
        assert 0 <= min(seconds, BACKOFF.max_retry_after) - sleeps[0] < 1.5, (seconds, sleeps)
