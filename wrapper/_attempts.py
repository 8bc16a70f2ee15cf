"""The attempt loop, once per side: ``run`` (sync) and ``arun`` (async), and the policy they follow.

Every call of a client — ``complete``, the opening of a ``stream``, each prompt of ``complete_many``
and of a Ray batch — goes through one of these loops: try, and on a typed error ask the policy
whether to try again and after how long. ``Attempts`` is a plain call's policy (retries as
``wrapper._retry`` says, up to ``max_retries``); a batch passes its own subclass, whose hooks pace
each attempt, count it and slow the batch down on 429s (``wrapper._batch``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from . import _retry
from ._exceptions import APIError

__all__ = ["Attempts", "arun", "run"]

T = TypeVar("T")


class Attempts:
    """One call's policy: the hooks its attempt loop calls. This one retries as ``_retry`` says.

    ``before`` runs before each attempt, ``succeeded`` after the one that worked; ``failed`` is
    asked after each failed one for the seconds to wait before the next, and raises the error when
    it is final; ``wait`` waits them. The async loop calls the ``a``-prefixed twins, which may await.
    """

    def __init__(self, max_retries: int) -> None:
        self.max_retries = max_retries
        self.retries = 0

    def before(self) -> None:
        """Before each attempt (a batch waits for its turn here)."""

    def succeeded(self, result: object) -> None:
        """After the attempt that worked."""

    def failed(self, error: APIError) -> float:
        """Seconds before the next attempt; raises ``error`` when it is final."""
        delay = _retry.retry_or_raise(error, self.retries, self.max_retries)
        self.retries += 1
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
    while True:
        await policy.abefore()
        try:
            result = await attempt()
        except APIError as error:
            delay = await policy.afailed(error)
        else:
            await policy.asucceeded(result)
            return result
        await policy.await_(delay)
