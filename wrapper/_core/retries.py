"""The attempt loop, once per side: ``run`` (sync) and ``arun`` (async), and the policy they follow.

Every call of a client — ``complete``, the opening of a ``stream``, each prompt of ``complete_many``
and of a Ray batch — goes through one of these loops: try, and on a typed error ask the policy
whether to try again and after how long. ``Attempts`` is a plain call's policy (its options' retry
policy, ``max_retries`` and deadline); a batch passes its own subclass, whose hooks pace
each attempt, count it and slow the batch down on 429s (``wrapper.batch._run``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from wrapper._generated.exceptions import APIConnectionError, APIError, APITimeoutError

from . import retry as _retry
from .error_mapping import timeout_phase

if TYPE_CHECKING:
    from wrapper._core.transports.base import Request

    from .options import Options

__all__ = ["Attempts", "arun", "run"]

T = TypeVar("T")


class Attempts:
    """One call's policy: the hooks its attempt loop calls. This one retries as ``options`` say.

    ``before`` runs before each attempt, ``succeeded`` after the one that worked; ``failed`` is
    asked after each failed one for the seconds to wait before the next, and raises the error when
    it is final; ``wait`` waits them. The async loop calls the ``a``-prefixed twins, which may await.
    With a ``deadline``, each attempt's timeouts are cut to the time left (``bounded``), and a
    failure after which no retry fits in it raises ``APITimeoutError`` saying so. The loops count
    the attempts (``made``); ``gave_up`` words the error they end with.
    """

    paced = False
    """Whether the async loop awaits ``abefore``/``asucceeded`` (a batch's do; these do nothing)."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.retries = 0
        self.made = 0
        self.started = time.monotonic()
        self._cut: float | None = None  # the time left the last attempt's timeouts were cut to

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
        if left == math.inf:
            return request
        self._cut = max(left, 0.001)
        return request.within(self._cut)

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
            raise self._ran_out(error)
        return delay

    def gave_up(self, error: APIError, *, begun: bool = False) -> APIError:
        """What to raise once ``error`` is final: a timeout the deadline had cut short says that the
        deadline ran out; another connection error says how many attempts were made (``begun``: and
        that a stream that had begun was not retried)."""
        phase = timeout_phase(error.__cause__)
        if phase is not None and self._cut is not None:
            configured = getattr(self.options.timeout, phase)
            if configured is None or configured > self._cut:
                return self._ran_out(error)
        if isinstance(error, APIConnectionError):
            note = "; a stream that has begun is not retried" if begun else ""
            error.message += f" (after {_attempts(self.made)}{note})"
            error.args = (error.message,)
        return error

    def _ran_out(self, error: APIError) -> APITimeoutError:
        timeout = APITimeoutError(
            f"the call's deadline of {self.options.deadline:g} s ran out after {_attempts(self.made)}; "
            f"the last failed with: {error}",
            request=error.request,
        )
        timeout.__cause__ = error
        return timeout

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


def _attempts(made: int) -> str:
    return f"{made} attempt{'s' if made != 1 else ''}"


def run(attempt: Callable[[], T], policy: Attempts) -> T:
    """``attempt()`` until it returns, as ``policy`` says."""
    while True:
        policy.before()
        policy.made += 1
        try:
            result = attempt()
        except APIError as error:
            try:
                delay = policy.failed(error)
            except APIError as final:
                final = policy.gave_up(final) if final is error else final
                raise final from final.__cause__
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
        policy.made += 1
        try:
            result = await attempt()
        except APIError as error:
            try:
                delay = await policy.afailed(error)
            except APIError as final:
                final = policy.gave_up(final) if final is error else final
                raise final from final.__cause__
        else:
            if paced:
                await policy.asucceeded(result)
            return result
        await policy.await_(delay)
