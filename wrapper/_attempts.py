"""The attempt loop, once per side: ``run`` (sync) and ``arun`` (async), and the policy they follow.

Every call of a client — ``complete``, the opening of a ``stream``, each prompt of ``complete_many``
and of a Ray batch — goes through one of these loops: try, and on a typed error ask the policy
whether to try again and after how long. ``Attempts`` is a plain call's policy (its options' retry
policy, ``max_retries`` and deadline); a batch passes its own subclass, whose hooks pace
each attempt, count it and slow the batch down on 429s (``wrapper._batch``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from wrapper._generated.exceptions import APIError, APITimeoutError

from . import _retry

if TYPE_CHECKING:
    from ._options import Options
    from ._transport import Request

__all__ = ["Attempts", "arun", "run"]

T = TypeVar("T")


class Attempts:
    """One call's policy: the hooks its attempt loop calls. This one retries as ``options`` say.

    ``before`` runs before each attempt, ``succeeded`` after the one that worked; ``failed`` is
    asked after each failed one for the seconds to wait before the next, and raises the error when
    it is final; ``wait`` waits them. The async loop calls the ``a``-prefixed twins, which may await.
    With a ``deadline``, each attempt's timeouts are cut to the time left (``bounded``), and a
    failure after which no retry fits in it raises ``APITimeoutError`` saying so.
    """

    paced = False
    """Whether the async loop awaits ``abefore``/``asucceeded`` (a batch's do; these do nothing)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.retries = 0
        self.started = time.monotonic()

    @property
    def max_retries(self) -> int:
        return self.options.max_retries

    def left(self) -> float:
        """Seconds left before the deadline (``inf`` without one)."""
        deadline = self.options.deadline
        return math.inf if deadline is None else deadline - (time.monotonic() - self.started)

    def bounded(self, request: Request) -> Request:
        """``request`` with its timeouts cut to the time left before the deadline."""
        left = self.left()
        return request if left == math.inf else request.within(max(left, 0.001))

    def before(self) -> None:
        """Before each attempt (a batch waits for its turn here)."""

    def succeeded(self, result: object) -> None:
        """After the attempt that worked."""

    def failed(self, error: APIError) -> float:
        """Seconds before the next attempt; raises ``error`` when it is final."""
        delay = _retry.retry_or_raise(error, self.retries, self.max_retries, self.options.retry)
        self.retries += 1
        return self.deadline_allows(error, delay)

    def deadline_allows(self, error: APIError, delay: float) -> float:
        """``delay``, unless waiting it and trying again cannot end before the deadline."""
        if delay >= self.left():
            raise APITimeoutError(
                f"the call's deadline of {self.options.deadline:g} s ran out after {self.retries} "
                f"attempt{'s' if self.retries != 1 else ''}; the last failed with: {error}",
                request=error.request,
            ) from error
        return delay

    def wait(self, seconds: float) -> None:
        _retry.sleep(seconds)

    async def abefore(self) -> None:
        self.before()

    async def asucceeded(self, result: object) -> None:
        self.succeeded(result)

    async def afailed(self, error: APIError) -> float:
        return self.failed(error)

    async def await_(self, seconds: float) -> None:
        await _retry.asleep(seconds)


def run(attempt: Callable[[], T], policy: Attempts) -> T:
    """``attempt()`` until it returns, as ``policy`` says."""
    while True:
        policy.before()
        try:
            result = attempt()
        except APIError as error:
            delay = policy.failed(error)
        else:
            policy.succeeded(result)
            return result
        policy.wait(delay)


async def arun(attempt: Callable[[], Awaitable[T]], policy: Attempts) -> T:
    """``await attempt()`` until it returns, as ``policy`` says."""
    paced = policy.paced
    while True:
        if paced:
            await policy.abefore()
        try:
            result = await attempt()
        except APIError as error:
            delay = await policy.afailed(error)
        else:
            if paced:
                await policy.asucceeded(result)
            return result
        await policy.await_(delay)
