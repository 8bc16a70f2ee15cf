"""When a route cools down: on a share of failures over a short window, for a few seconds or its
Retry-After, then tried again (a clock of the test's own)."""

from __future__ import annotations

from wrapper.router._health import COOLDOWN, MIN_FAILURES, WINDOW, Health


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_failures_among_many_successes_are_blips_not_a_route_down() -> None:
    clock = Clock()
    health = Health(clock)
    for _ in range(10):
        for _ in range(4):
            health.succeeded()
        health.failed(None)
        clock.now += 0.1
    assert health.left() == 0  # ten failures, but a fifth of the answers
    assert health.cooldowns == 0


def test_a_route_that_keeps_failing_rests_then_one_answer_decides() -> None:
    clock = Clock()
    health = Health(clock)
    for _ in range(MIN_FAILURES - 1):
        health.failed(None)
    assert health.left() == 0  # too few to tell
    health.failed(None)
    assert health.left() == COOLDOWN
    clock.now += COOLDOWN
    assert health.left() == 0
    health.failed(None)  # the first answer after the cooldown failed: another cooldown at once
    assert health.left() == COOLDOWN
    assert health.cooldowns == 2
    clock.now += COOLDOWN
    health.succeeded()  # it came back: failures count afresh
    health.failed(None)
    assert health.left() == 0


def test_a_cooldown_lasts_as_long_as_the_servers_retry_after() -> None:
    clock = Clock()
    health = Health(clock)
    for _ in range(MIN_FAILURES - 1):
        health.failed(None)
    health.failed(30.0)
    assert health.left() == 30.0


def test_failures_older_than_the_window_are_forgotten() -> None:
    clock = Clock()
    health = Health(clock)
    for _ in range(MIN_FAILURES - 1):
        health.failed(None)
    clock.now += WINDOW + 1
    health.failed(None)
    assert health.left() == 0


def test_a_route_whose_last_answers_all_failed_cools_down_at_once_whatever_it_served_before() -> None:
    clock = Clock()
    health = Health(clock)
    for _ in range(100):  # a healthy stretch: far more successes than the share rule would weigh
        health.succeeded()
        clock.now += 0.05
    for _ in range(MIN_FAILURES - 1):
        health.failed(None)
    assert health.left() == 0  # a blip so far
    health.failed(None)  # down now: its last answers all failed
    assert health.left() == COOLDOWN
    assert health.cooldowns == 1
