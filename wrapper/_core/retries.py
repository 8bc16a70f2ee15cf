"""Retries, in one place: the decision (``retry_or_raise``: whether a failure is retried, as the call's
``RetryPolicy`` says, and after how long), each call's ``Attempts`` (its retries, its deadline, its
hooks, and the ``Target`` a ``wrapper.Routing`` sends each attempt to) and the attempt loop that follows
them, once per side (``run``, ``arun``).

Every call goes through one of these loops: ``complete``, the opening of a ``stream`` (up to its first
chunk), each prompt of ``complete_many`` and of a Ray batch, and a router's calls over its routes.
What is retried by default: connection errors and timeouts, 408, 409, 429 and 5xx; a response's
``x-should-retry`` overrides its status rule. The wait is the server's ``retry-after-ms`` /
``Retry-After`` when it gives one (up to ``max_retry_after``), otherwise exponential backoff with
jitter. ``sleep`` and ``asleep`` wait, or return at once in testing mode (``wrapper.testing``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from wrapper._generated.exceptions import APIConnectionError, APIError, APITimeoutError
from wrapper.testing import is_testing

from .error_mapping import timeout_phase
from .hooks import FORGIVEN_429S, CallHooks, CallInfo
from .redact import redacted_url
from .stream_body import DeadlinePassed

if TYPE_CHECKING:
    from .options import Options, RetryPolicy
    from .results import Completion, CompletionChunk
    from .transports.base import Request

__all__ = ["Attempts", "Picks", "Target", "arun", "asleep", "retry_or_raise", "run", "sleep"]

T = TypeVar("T")
logger = logging.getLogger("wrapper")


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """Where an attempt goes: a client (all of one call's on the same side, sync or async), the model,
    the request's parameters, the options its requests are sent with (the client's, with the call's on
    top: ``Options.split``), and the route's name, which the results carry (``Completion.route``)."""

    client: Any
    model: str
    params: Mapping[str, Any]
    options: Options
    route: str


class Picks(Protocol):
    """What the attempt loop asks of a call's ``wrapper.Routing``: where each attempt goes."""

    options: Options

    def pick(self) -> tuple[Target, float] | None: ...

    def exhausted(self, last: APIError, attempts: int) -> APIError: ...


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


def hooks_of(options: Options, call: CallInfo) -> list[CallHooks]:
    """The hooks ``options``' factories give ``call`` (those that are on: ``HookFactory``), then its API's
    response cache's if they name one."""
    factories = options.hooks if options.cache is None else (*options.hooks, call.client.API.cache_hooks)
    return [hook for factory in factories if factory and (hook := factory(call)) is not None]


class Attempts:
    """One call's attempts: its retries as ``options`` say, its deadline, and its hooks.

    As a context manager it is the call: ``finished`` is called on its hooks on the way out. A call
    made on a client has one set of hooks, which see every attempt; one with a ``Routing`` visits a
    target with each attempt, and each visit has hooks of its own, which see that attempt alone
    (``routing`` says why). The hooks' ``active()`` contexts are entered from the first attempt on,
    until the call is over (a stream's: until it opened). With a ``deadline``, each attempt's timeouts
    are cut to the time left (``bounded``). A failure whose wait before the next attempt (a backoff, a
    target's cooldown) does not fit in what is left is final: it is raised as it is (its status, body
    and ``Retry-After`` kept), its message saying that the deadline left no room to retry;
    ``APITimeoutError`` is for an attempt the deadline cut short, or a wait for a turn that outlasted
    it. The loops follow ``next()`` and ``failed()``; ``gave_up`` words the error they end with.
    """

    __slots__ = (
        "_asked",
        "_contexts",
        "_cut",
        "_forgiven_pass",
        "_pending",
        "_prompt",
        "_routing",
        "_stream",
        "build",
        "forgiven",
        "hooks",
        "last",
        "made",
        "options",
        "request",
        "retries",
        "started",
        "target",
        "was_answered",
    )

    def __init__(
        self,
        options: Options,
        hooks: Sequence[CallHooks] = (),
        *,
        stream: bool = False,
        started: float | None = None,
        routing: Picks | None = None,
        prompt: str = "",
        build: Callable[[Target], Request] | None = None,
    ) -> None:
        self.options = options
        self.hooks = hooks
        self.retries = 0
        self.made = 0
        self.forgiven = 0
        self.started = time.monotonic() if started is None else started
        self.last: APIError | None = None
        self.target: Target | None = None
        self.request: Request | None = None  # the request of the attempts (of the visit, when routed)
        self.build = build  # builds a target's request (checking its arguments), when routed
        self._stream = stream
        self._routing = routing
        self._prompt = prompt
        self._pending: Target | None = None  # picked, and waiting for its cooldown's end
        self._forgiven_pass = True  # whether the hooks forgave every failure of this pass
        self._cut: float | None = None  # the time left the last attempt's timeouts were cut to
        self._contexts: ExitStack | None = None
        self._asked = False  # whether the hooks (of this visit, when routed) were asked for an answer
        self.was_answered = False  # a hook answered: no attempt was made

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_visit(exc)

    def _enter(self) -> None:
        """Enter the hooks' ``active()`` contexts (those that have one)."""
        base = CallHooks.active
        active = [hook for hook in self.hooks if type(hook).active is not base]
        if active:
            self._contexts = contexts = ExitStack()
            for hook in active:
                contexts.enter_context(hook.active())

    def opened(self) -> None:
        """A stream opened: its hooks' contexts are left (a generator must not keep them set as it yields)."""
        if self._contexts is not None:
            self._contexts.close()
            self._contexts = None

    def _end_visit(self, error: BaseException | None) -> None:
        self.opened()
        self._asked = False
        hooks, self.hooks = self.hooks, ()
        for hook in hooks:
            hook.finished(error)

    @property
    def sending(self) -> Options:
        """The options the attempt under way is sent with (a target's own, on a routed call)."""
        return self.options if self.target is None else self.target.options

    def left(self) -> float:
        """Seconds left before the deadline (``inf`` without one)."""
        deadline = self.options.deadline
        return math.inf if deadline is None else deadline - (time.monotonic() - self.started)

    def bounded(self, request: Request) -> Request:
        """``request`` with its timeouts cut to the time left before the deadline."""
        self.request = request
        left = self.left()
        if left == math.inf:
            return request
        self._cut = max(left, 0.001)
        return request.within(self._cut)

    def next(self) -> Target | float | None:
        """Before each attempt: where it goes (None: the call's client), or seconds to wait before asking
        again (a pass over the targets is over, or the picked one is cooling down)."""
        if self._routing is None:
            if self.made == 0 and self.hooks:
                self._enter()
            return None
        target = self._pending
        if target is None:
            chosen = self._routing.pick()
            if chosen is None:  # every target failed this pass
                forgiven, self._forgiven_pass = self._forgiven_pass, True
                assert self.last is not None
                return self._retry(self.last, forgiven)
            target, cooling = chosen
            if 0 < cooling < self.left():
                self._pending = target
                return cooling
            if cooling > 0 and self.last is not None:  # no time left to wait for its cooldown
                raise self._no_room(self.last, cooling, self.left())
            # else the only target, and nothing tried yet: try it now
        self._pending = None
        return self._visit(target)

    def _visit(self, target: Target) -> Target:
        """Begin the visit of ``target``: its request, and its hooks from its options' factories."""
        assert self.build is not None
        self.request = self.build(target)
        self.target = target
        call = CallInfo(
            target.client,
            target.model,
            self._prompt,
            target.params,
            self._stream,
            target.route,
            self._due(),
            target.options,
        )
        self.hooks = hooks_of(target.options, call)
        if self.hooks:
            self._enter()
        return target

    def _due(self) -> float | None:
        """When the deadline passes, on ``time.monotonic()``'s clock (None: no deadline)."""
        deadline = self.options.deadline
        return None if deadline is None else self.started + deadline

    def _asking(self) -> list[CallHooks]:
        """The hooks to ask for an answer now: once a visit, before its first attempt (``next()`` has
        entered their contexts), those that can give one (that override ``answer`` or ``aanswer``)."""
        if self._asked or not self.hooks:
            return []
        self._asked = True
        answer, aanswer = CallHooks.answer, CallHooks.aanswer
        return [
            hook
            for hook in self.hooks
            if type(hook).answer is not answer or type(hook).aanswer is not aanswer
        ]

    def answer(self) -> Completion | Sequence[CompletionChunk] | None:
        """The hooks' answer to the call (a cache's hit), asked once before its first attempt (a routed
        call's: each visit's); every hook is told of it (``answered``). None: make the attempt."""
        for hook in self._asking():
            assert self.request is not None
            given = hook.answer(self.request.url, self.request.content)
            if given is not None:
                self._answered(given)
                return given
        return None

    async def aanswer(self) -> Completion | Sequence[CompletionChunk] | None:
        for hook in self._asking():
            assert self.request is not None
            given = await hook.aanswer(self.request.url, self.request.content)
            if given is not None:
                self._answered(given)
                return given
        return None

    def _answered(self, given: Completion | Sequence[CompletionChunk]) -> None:
        self.was_answered = True
        completion = None if isinstance(given, Sequence) else given
        for hook in self.hooks:
            hook.answered(completion)

    def went(self) -> None:
        """The attempt goes, its hooks' ``before`` done: counted, unless they waited past the deadline."""
        if self.options.deadline is not None and self.left() <= 0:
            raise self._ran_out(self.last)
        self.made += 1

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
        return self._decide(error, forgiven)

    async def afailed(self, error: APIError) -> float:
        forgiven = False
        for hook in self.hooks:
            forgiven = await hook.afailed(error) or forgiven
        return self._decide(error, forgiven)

    def _decide(self, error: APIError, forgiven: bool) -> float:
        if self._routing is None:
            return self._retry(error, forgiven)
        self._end_visit(error)  # a routed attempt's visit is over: its hooks saw all of it
        if not self.options.retry.retries(error):
            raise error  # the request's fault: no other target would take it
        self.last = error
        self._forgiven_pass = self._forgiven_pass and forgiven
        left = self.left()
        if left <= 0:
            raise self._no_room(error, 0.0, left)
        return 0.0  # on to the next target, spending no retry

    def _retry(self, error: APIError, forgiven: bool) -> float:
        """The retry decision (``retry_or_raise``) for ``error``, which ends an attempt (or a pass over the
        targets): the seconds to wait before the next, or the final error raised. A failure the hooks
        forgave is retried even with the budget spent (unless there is none at all), ``FORGIVEN_429S``
        times a call, and spends none of it."""
        forgiven = forgiven and self.forgiven < FORGIVEN_429S
        max_retries = self.options.max_retries
        retries = min(self.retries, max(max_retries - 1, 0)) if forgiven else self.retries
        if forgiven and self._routing is not None and retries < max_retries:
            self.forgiven += 1
            return 0.0  # another pass at once: each target's pacer waits out its own pause
        left = self.left()
        try:
            delay = retry_or_raise(error, retries, max_retries, self.options.retry, left)
        except APIError as final:
            if final is error and self._routing is not None:
                raise self._exhausted(error) from error
            raise
        if forgiven:
            self.forgiven += 1
        else:
            self.retries += 1
        if delay >= left:
            raise self._no_room(error, delay, left)
        for hook in self.hooks:
            hook.retrying(error, self.made, delay)
        return delay

    def _exhausted(self, last: APIError) -> APIError:
        assert self._routing is not None
        error = self._routing.exhausted(last, self.made)
        if error is not last:
            error.__cause__ = last
        return error

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
        configured = getattr(self.sending.timeout, phase)
        return configured is None or configured > self._cut

    def _no_room(self, error: APIError, delay: float, left: float) -> APIError:
        """``error``, final since the wait before a retry (``delay``) does not fit in what the deadline
        has ``left``: its message says so; a timeout the deadline cut short is an ``APITimeoutError``."""
        if self._cut_short(error):
            return self._ran_out(error)
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

    def too_late(self, passed: DeadlinePassed) -> APITimeoutError:
        """The ``APITimeoutError`` for a deadline that ``passed`` while a response was read."""
        assert self.request is not None
        return passed.error(self.request.as_httpx(), self)

    def _ran_out(self, error: APIError | None) -> APITimeoutError:
        if error is None:  # before any attempt failed: it waited for its turn
            assert self.request is not None
            return APITimeoutError(
                f"{self.ran_out(_attempts(self.made))}, waiting for its turn", request=self.request.as_httpx()
            )
        timeout = APITimeoutError(
            f"{self.ran_out(_attempts(self.made))}; the last failed with: {error}", request=error.request
        )
        timeout.__cause__ = error
        return timeout


def _attempts(made: int) -> str:
    return f"{made} attempt{'s' if made != 1 else ''}"


def retry_or_raise(
    error: APIError, retries: int, max_retries: int, policy: RetryPolicy, left: float = math.inf
) -> float:
    """Seconds to wait before retry ``retries + 1`` of ``error``'s request (logged at INFO when the wait
    fits in the ``left`` seconds of the call's deadline: one that does not is no retry, and the caller
    raises the error saying so).

    Raises ``error`` when it is final: ``policy`` does not retry it, or ``retries`` has reached
    ``max_retries``.
    """
    if retries >= max_retries or not policy.retries(error):
        raise error
    delay = policy.backoff(retries, policy.retry_after(error))
    if delay >= left:
        return delay
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


def run(
    attempt: Callable[[Target | None], T],
    attempts: Attempts,
    answered: Callable[[Completion | Sequence[CompletionChunk], Target | None], T] | None = None,
) -> T:
    """``attempt(target)`` until it returns, as ``attempts`` says; or, with ``answered``, what it makes of
    the hooks' answer, when one gives it before the first attempt (of each target, when routed)."""
    try:
        while True:
            target = attempts.next()
            if type(target) is float:
                sleep(target)
                continue
            if answered is not None and (given := attempts.answer()) is not None:
                return answered(given, target)  # type: ignore[arg-type]
            for hook in attempts.hooks:
                hook.before()
            attempts.went()
            try:
                return attempt(target)  # type: ignore[arg-type]
            except APIError as error:
                try:
                    delay = attempts.failed(error)
                except APIError as final:
                    final = attempts.gave_up(final) if final is error else final
                    raise final from final.__cause__
            if delay:
                sleep(delay)
    except DeadlinePassed as passed:  # while a response was read: final, no attempt fits after it
        raise attempts.too_late(passed) from passed.__cause__


async def arun(
    attempt: Callable[[Target | None], Awaitable[T]],
    attempts: Attempts,
    answered: Callable[[Completion | Sequence[CompletionChunk], Target | None], T] | None = None,
) -> T:
    """``await attempt(target)`` until it returns, as ``attempts`` says (``answered``: as ``run``'s)."""
    try:
        while True:
            target = attempts.next()
            if type(target) is float:
                await asleep(target)
                continue
            # ``attempts.hooks`` first: with none, no coroutine is made to ask none (``run`` has no such cost)
            if answered is not None and attempts.hooks and (given := await attempts.aanswer()) is not None:
                return answered(given, target)  # type: ignore[arg-type]
            for hook in attempts.hooks:
                await hook.abefore()
            attempts.went()
            try:
                return await attempt(target)  # type: ignore[arg-type]
            except APIError as error:
                try:
                    delay = await attempts.afailed(error)
                except APIError as final:
                    final = attempts.gave_up(final) if final is error else final
                    raise final from final.__cause__
            if delay:
                await asleep(delay)
    except DeadlinePassed as passed:  # while a response was read: final, no attempt fits after it
        raise attempts.too_late(passed) from passed.__cause__
