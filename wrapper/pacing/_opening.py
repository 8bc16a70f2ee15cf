"""How a pacer told no limit opens: slow start, the rate a server takes found step by step.

Sending a batch's ``concurrency`` requests at once meets a server's unannounced limit with a burst of
429s. Instead a ``Pacer`` with no limit opens at ``OPENING`` requests a second (a quarter second's
budget, four, at once) and, as TCP's slow start does, doubles its rate after each step whose answers
were clean: 429s no more than ``share`` of them (the share above which the pacer cuts its rate). A
step lasts ``DOUBLING`` seconds, or two round trips when that is longer (each answer is matched to
the oldest request not answered yet), so that its answers tell what its requests met. Steps that short
let a batch against a server with no limit reach its full concurrency within a fraction of a second.
They take for granted that a 429 comes back within a step, as it does from a server nearby: a server
farther away sees more requests before its first 429 comes back.

After a step with more 429s than that, the rate falls to what got through in it, and the pacer's
adaptation (``wrapper.pacing._pacer``) measures the limit and cuts to it: that first cut ends the opening.
The rate doubles only when the requests kept up with it (took half its slots): a rate they did not
reach, a busy caller's, was not tried; and, once answers come, only up to twice what came back in the
step, as TCP's window grows with its acknowledgements. When the answers fall behind (fewer than half
the requests of a step: the server slows down or queues them), the rate falls to what came back: a
sender that kept going at a rate nothing had vouched for met a server's limit with a step's worth of
requests in flight (a sync batch, whose threads are late for their turns, sent 67 in four steps with
no answer back, and met 65 429s). And once a step passes in which the requests neither kept up
nor waited for their turn, the batch's concurrency is what limits it, not the rate: the opening is
over and the rate is the limit given, none.

A step sends no more than its rate's worth (or ``AT_ONCE``, when more), however late its requests
come: a request whose turn comes once its step is full waits for the next step. The pacer's quarter
second of budget at a rate the opening reached is a dozen steps' worth, and a batch held up for a
moment (a busy machine: its threads late for their turns) sent it all at once when it resumed: 33
requests in one step of 20 ms into a server's limit, 33 429s. Nor does a step judged long after its
end (two lengths after it began) end the opening: its caller was held up, and its requests could
neither wait for their turn nor go. A sync batch held up 0.4 s so took a step with one request and no
wait for a batch its concurrency limits, went at full concurrency, and met 210 429s.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

__all__ = ["DOUBLING", "OPENING", "Opening"]

OPENING = 16.0
"""Requests a second a pacer told no limit opens with."""
AT_ONCE = OPENING / 4
"""Requests a step may send at once however short it is: a quarter second at ``OPENING``."""
DOUBLING = 0.02
"""Seconds a step of the opening lasts at least: the rate doubles after each whose answers were clean."""
_TIMED = 4096  # requests whose times are kept to time round trips, at most


class _Step:
    """One step of the opening: its rate, when it began, and what happened in it."""

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start
        self.sent = 0
        self.waited = False  # whether a request was held back (by the rate, or a 429's pause)
        self.answered = 0
        self.limited = 0  # 429s among the answers


class Opening:
    """A pacer's opening: its current step and the round trip that sets the steps' length.

    Not thread-safe: its pacer's lock guards it. ``on`` until the opening is over.
    """

    def __init__(self, on: bool, share: float) -> None:
        self.on = on
        self._share = share
        self._step: _Step | None = None  # from the first request
        self._sends: deque[float] = deque(maxlen=_TIMED)  # when the requests not answered yet went
        self._round_trip = math.inf  # seconds from a request to its answer, smoothed (inf: none yet)

    @property
    def length(self) -> float:
        """Seconds a step lasts: ``DOUBLING``, or two round trips if longer."""
        return DOUBLING if self._round_trip == math.inf else max(DOUBLING, 2 * self._round_trip)

    @property
    def full(self) -> bool:
        """Whether the opening is on and its current step sent all it may: its rate's worth, or
        ``AT_ONCE`` if more."""
        step = self._step
        return self.on and step is not None and step.sent >= max(step.rate * self.length, AT_ONCE)

    @property
    def in_flight(self) -> int:
        """Requests sent (timed) and not answered yet."""
        return len(self._sends)

    @property
    def next_step(self) -> float:
        """When the current step ends (the next begins once asked about)."""
        return -math.inf if self._step is None else self._step.start + self.length

    def rate(self, now: float) -> tuple[float, bool]:
        """The request rate at ``now``, and whether it fell since asked (slots booked at the old one
        are void). A step is judged when the next is first asked about, however late: a pause of
        the caller's (a slow first connection, say) is not a run of steps without a 429."""
        step = self._step
        if step is None:
            step = self._step = _Step(OPENING, now)
        length = self.length
        if now - step.start < length:
            return step.rate, False
        rate, fell = step.rate, step.limited > self._share * step.answered
        # Requests that neither waited for their turn nor kept up: the batch's concurrency limits it,
        # not the rate; unless the step is judged long after its end: its caller was held up (a busy
        # machine), and its requests could neither wait nor go.
        unlimited = not step.waited and now - step.start <= 2 * length
        if fell:
            rate = max(min((step.answered - step.limited) / length, rate), OPENING)
        elif self._round_trip != math.inf and step.answered < step.sent / 2:
            # Answers lag behind the requests (the server slows, or queues them): go no faster than
            # they come back, rather than send on blind at a rate nothing has vouched for yet.
            rate, fell = max(min(step.answered / length, rate), OPENING), True
        elif step.sent >= max((rate * length - 1) / 2, 1):  # half its slots taken (give or take one)
            # The answers kept up (or none came yet: what the requests meet is not known until one does):
            # double, to at most twice what came back (as TCP's window grows), so that the step on which
            # a server's limit is met sends no more than that.
            window = math.inf if self._round_trip == math.inf else 2 * step.answered / length
            if rate < window:
                rate = min(2.0 * rate, window)
            elif unlimited:  # the requests, not the rate, set the pace
                self.end()
        elif step.sent and unlimited:
            self.end()
        self._step = _Step(rate, now)
        return rate, fell

    def end(self) -> None:
        self.on = False
        self._sends.clear()

    def went(self, now: float, count: int, *, timed: bool = True) -> None:
        """``count`` requests went at ``now`` (``timed``: their answers will time a round trip)."""
        assert self._step is not None
        self._step.sent += count
        if timed:
            self._sends.extend(itertools.repeat(now, min(count, _TIMED)))

    def waited(self) -> None:
        """A request was held back for its turn."""
        assert self._step is not None
        self._step.waited = True

    def answered(self, now: float, limited: bool) -> None:
        """An answer came at ``now``, a 429 if ``limited``."""
        assert self._step is not None
        self._step.answered += 1
        self._step.limited += limited
        if self._sends:  # smoothed as TCP smooths its round trip time
            took = now - self._sends.popleft()
            self._round_trip = took if self._round_trip == math.inf else (7 * self._round_trip + took) / 8
