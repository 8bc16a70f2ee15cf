"""Retries, in one place: the decision (``retry_or_raise``: whether a failure is retried, as the call's
``RetryPolicy`` says, and after how long), each call's ``Attempts`` (its retries, its deadline, its
hooks) and the attempt loop that follows them, once per side (``run``, ``arun``).

Every call of a client goes through one of these loops: ``complete``, the opening of a ``stream``
(up to its first chunk), each prompt of ``complete_many`` and of a Ray batch. What is retried by
default: connection errors and timeouts, 408, 409, 429 and 5xx; a response's ``x-should-retry``
overrides its status rule. The wait is the server's ``retry-after-ms`` / ``Retry-After`` when it
gives one (up to ``max_retry_after``), otherwise exponential backoff with jitter. ``sleep`` and
``asleep`` wait, or return at once in testing mode (``wrapper.testing``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from wrapper._generated.exceptions import APIConnectionError, APIError, APIStatusError, APITimeoutError
from wrapper.testing import is_testing

from .error_mapping import timeout_phase
from .options import RetryPolicy
from .redact import redacted_url

if TYPE_CHECKING:
    from .hooks import CallHooks
    from .options import Options
    from .results import Completion, CompletionChunk
    from .transports.base import Request

__all__ = [
    "Attempts",
    "arun",
    "asleep",
    "is_retryable",
    "retry_or_raise",
    "run",
    "sleep",
]

T = TypeVar("T")
logger = logging.getLogger("wrapper")

DEFAULT_POLICY = RetryPolicy()


def is_retryable(exc: BaseException, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """True for errors worth another attempt under ``policy`` (``RetryPolicy.retries``)."""
    return policy.retries(exc)


def retry_or_raise(
    error: APIError, retries: int, max_retries: int, policy: RetryPolicy = DEFAULT_POLICY
) -> float:
    """Seconds to wait before retry ``retries + 1`` of ``error``'s request (logged at INFO).

    Raises ``error`` when it is final: ``policy`` does not retry it, or ``retries`` has reached
    ``max_retries``.
    """
    if retries >= max_retries or not is_retryable(error, policy):
        raise error
    delay = policy.backoff(retries, error.retry_after if isinstance(error, APIStatusError) else None)
    request, url = error.request, redacted_url(error.request.url)
    cause = str(error).replace(f" ({request.method} {url})", "", 1)  # a status error's message names it too
    logger.info(
        "retrying %s %s in %.2fs (retry %d of %d) after: %s",
        request.method,
        url,
        delay,
        retries + 1,
        max_retries,
        cause,
    )
    return delay


def waited(seconds: float) -> float:
    """How long a retry's wait of ``seconds`` really lasts: 0 in testing mode (the one place it is read)."""
    return 0.0 if is_testing() else seconds


def sleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry; return at once in testing mode."""
    time.sleep(waited(seconds))


async def asleep(seconds: float) -> None:
    """Wait ``seconds`` before a retry without blocking the loop; return at once in testing mode."""
    import asyncio  # not at module level: `import wrapper.scale` stays light

    await asyncio.sleep(waited(seconds))


class Attempts:
    """One call's attempts: its retries as ``options`` say, its deadline, and its hooks.

    As a context manager it is the call: its hooks' ``active()`` contexts are entered (but for a
    stream, whose opening enters ``active()`` itself) and ``finished`` is called on the way out.
    With a ``deadline``, each attempt's timeouts are cut to the time left (``bounded``). A failure
    whose wait before the next attempt does not fit in what is left is final: it is raised as it is
    (its status, body and ``Retry-After`` kept), its message saying that the deadline left no room
    to retry; ``APITimeoutError`` is for an attempt the deadline cut short. The loops count the
    attempts (``made``); ``gave_up`` words the error they end with.
    """

    __slots__ = ("_contexts", "_cut", "_stream", "hooks", "made", "options", "retries", "started")

    def __init__(self, options: Options, hooks: Sequence[CallHooks] = (), *, stream: bool = False) -> None:
        self.options = options
        self.hooks = hooks
        self.retries = 0
        self.made = 0
        self.started = time.monotonic()
        self._stream = stream
        self._cut: float | None = None  # the time left the last attempt's timeouts were cut to
        self._contexts: ExitStack | None = None

    def __enter__(self) -> Self:
        if self.hooks and not self._stream:
            self._contexts = self._active()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._contexts is not None:
            self._contexts.close()
        for hook in self.hooks:
            hook.finished(exc)

    def active(self) -> AbstractContextManager[object]:
        """The hooks' contexts, for the part of a stream that is the call's (its opening)."""
        return self._active() if self.hooks else nullcontext()

    def _active(self) -> ExitStack:
        contexts = ExitStack()
        for hook in self.hooks:
            contexts.enter_context(hook.active())
        return contexts

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

    def succeeded(self, completion: Completion | None) -> None:
        for hook in self.hooks:
            hook.succeeded(completion)

    async def asucceeded(self, completion: Completion | None) -> None:
        for hook in self.hooks:
            await hook.asucceeded(completion)

    def chunk(self, chunk: CompletionChunk) -> CompletionChunk:
        for hook in self.hooks:
            hook.chunk(chunk)
        return chunk

    def failed(self, error: APIError) -> float:
        """Seconds before the next attempt; raises the error when it is final."""
        forgiven = False
        for hook in self.hooks:
            forgiven = hook.failed(error) or forgiven
        return self._retry(error, forgiven)

    async def afailed(self, error: APIError) -> float:
        forgiven = False
        for hook in self.hooks:
            forgiven = await hook.afailed(error) or forgiven
        return self._retry(error, forgiven)

    def _retry(self, error: APIError, forgiven: bool) -> float:
        """The retry decision; a failure a hook forgave is retried even with the budget spent (unless
        there is none at all), and spends none of it."""
        max_retries = self.options.max_retries
        retries = min(self.retries, max(max_retries - 1, 0)) if forgiven else self.retries
        delay = retry_or_raise(error, retries, max_retries, self.options.retry)
        if not forgiven:
            self.retries += 1
        left = self.left()
        if delay >= left:
            raise self._no_room(error, delay, left)
        for hook in self.hooks:
            hook.retrying(error, self.made, delay)
        return delay

    def gave_up(self, error: APIError, *, begun: bool = False) -> APIError:
        """What to raise once ``error`` is final: a timeout the deadline had cut short says that the
        deadline ran out; another connection error says how many attempts were made (``begun``: and
        that a stream that had begun was not retried)."""
        if self._cut_short(error):
            return self._ran_out(error)
        if isinstance(error, APIConnectionError):
            note = "; a stream that has begun is not retried" if begun else ""
            error.message += f" (after {_attempts(self.made)}{note})"
            error.args = (error.message,)
        return error

    def _cut_short(self, error: APIError) -> bool:
        """Whether ``error`` is a timeout that ran out at the deadline, before the client's own timeout."""
        phase = timeout_phase(error.__cause__)
        if phase is None or self._cut is None:
            return False
        configured = getattr(self.options.timeout, phase)
        return configured is None or configured > self._cut

    def _no_room(self, error: APIError, delay: float, left: float) -> APIError:
        """``error``, final since the wait before a retry (``delay``) does not fit in what the deadline
        has ``left``: its message says so (unless the deadline cut it short: ``gave_up`` says that)."""
        if not self._cut_short(error):
            error.message += (
                f"; the call's deadline of {self.options.deadline:g} s left no room to retry "
                f"({max(left, 0.0):.2f} s left, {delay:.2f} s to wait before the next attempt)"
            )
            error.args = (error.message,)
        return error

    def ran_out(self, after: str, where: str = "") -> str:
        """What an ``APITimeoutError`` says when the deadline passed during the call (``where``, e.g.
        "before the response was complete, "), ``after`` what, and the time the call took."""
        elapsed = time.monotonic() - self.started
        return (
            f"the call's deadline of {self.options.deadline or 0.0:g} s ran out {where}after {after} "
            f"({elapsed:.2f} s elapsed)"
        )

    def _ran_out(self, error: APIError) -> APITimeoutError:
        timeout = APITimeoutError(
            f"{self.ran_out(_attempts(self.made))}; the last failed with: {error}", request=error.request
        )
        timeout.__cause__ = error
        return timeout


def _attempts(made: int) -> str:
    return f"{made} attempt{'s' if made != 1 else ''}"


def run(attempt: Callable[[], T], attempts: Attempts) -> T:
    """``attempt()`` until it returns, as ``attempts`` says."""
    hooks = attempts.hooks
    while True:
        for hook in hooks:
            hook.before()
        attempts.made += 1
        try:
            return attempt()
        except APIError as error:
            try:
                delay = attempts.failed(error)
            except APIError as final:
                final = attempts.gave_up(final) if final is error else final
                raise final from final.__cause__
        sleep(delay)


async def arun(attempt: Callable[[], Awaitable[T]], attempts: Attempts) -> T:
    """``await attempt()`` until it returns, as ``attempts`` says."""
    hooks = attempts.hooks
    while True:
        for hook in hooks:
            await hook.abefore()
        attempts.made += 1
        try:
            return await attempt()
        except APIError as error:
            try:
                delay = await attempts.afailed(error)
            except APIError as final:
                final = attempts.gave_up(final) if final is error else final
                raise final from final.__cause__
        await asleep(delay)
