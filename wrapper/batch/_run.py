"""Many prompts through one client with bounded concurrency: ``complete_many``, ``acomplete_many`` and
``acomplete_jobs``.

Prompts are pulled lazily, never more than ``concurrency`` ahead of the results handed back, so a
million prompts from a file never sit in memory. Each prompt is one ``complete`` call of the client,
with hooks of the batch's (``wrapper.CallHooks``): every attempt waits for a limiter (``Pacer``:
requests and tokens per minute when given, slowing down on 429s, a 429's Retry-After pausing every
request rather than one), and is counted in the batch's stats. A ``Budget`` is asked as each prompt is
about to be sent: once it says no, nothing more is sent and the prompts in flight finish.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from concurrent.futures import Future
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs
import httpx

from wrapper import CallHooks, CallInfo, Completion, RequestOptions
from wrapper.errors import APIError, APIStatusError, RateLimitError

from ._budget import Budget
from ._format import completion_fields, error_fields
from ._pacing import Limiter, Pacer, estimate_tokens
from ._stats import BatchStats, Tally

if TYPE_CHECKING:
    from wrapper import AsyncClient, SyncClient

__all__ = [
    "AsyncBatchIterator",
    "AsyncCompleter",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "Job",
    "acomplete_jobs",
    "acomplete_many",
    "acomplete_with",
    "complete_many",
    "complete_with",
]

Job = tuple[int, str, Mapping[str, Any]]
"""One unit of work: the index results carry, the prompt, the keyword arguments for ``complete``."""
FORGIVEN_429S = 10
"""At most this many of a prompt's 429s cost no retry (each slows the batch down): none retries for ever."""
_OPTIONS = frozenset(RequestOptions.__annotations__)


@attrs.frozen
class BatchResult:
    """One prompt's outcome: its index in the input and either its completion or its typed error; in a
    fan-out (``fan_out_with``, ``Router.fan_out``), the ``target`` that answered it."""

    index: int
    completion: Completion | None = None
    error: APIError | None = None
    target: str | None = attrs.field(default=None, kw_only=True)

    @property
    def ok(self) -> bool:
        """True when the prompt completed."""
        return self.error is None

    @property
    def headers(self) -> Mapping[str, str]:
        """The headers of the final response (case-insensitive); empty when none came (a connection error)."""
        headers = getattr(self.completion, "headers", None)  # a Completion's own, where results carry them
        if headers is not None:
            return headers  # type: ignore[no-any-return]
        response = getattr(self.error, "response", None)  # an httpx (or httpx2) response, if one came
        headers = getattr(response, "headers", None)
        return headers if isinstance(headers, Mapping) else httpx.Headers()

    @property
    def request_id(self) -> str | None:
        """The final response's ``x-request-id``, for the provider's support."""
        return self.headers.get("x-request-id")

    def to_dict(self) -> dict[str, Any]:
        """The result as a result line, the same as the command line writes and Ray's columns: ``index``,
        ``target`` (in a fan-out), then ``text``, ``finish_reason``, ``prompt_tokens``,
        ``response_tokens``, ``logprobs``, ``request_id``, ``route`` (as ``Completion.to_dict()`` gives
        them) and ``error`` (``{"type", "status", "message"}``), the completion's fields None on an error
        and ``error`` None on a success."""
        line: dict[str, Any] = {"index": self.index}
        if self.target is not None:
            line["target"] = self.target
        return {**line, **self.fields()}

    def fields(self) -> dict[str, Any]:
        """``to_dict()`` but for ``index`` and ``target``: the fields a line holds of any result."""
        if self.completion is not None:
            return completion_fields(self.completion)
        assert self.error is not None
        return error_fields(self.error, self.request_id)


class BatchIterator(Iterator[BatchResult]):
    """What sync ``complete_many`` returns: its results as they come, ``close()``, and live ``stats``."""

    def __init__(self, results: Generator[BatchResult, None, None], tally: Tally) -> None:
        self._results = results
        self._tally = tally

    def __next__(self) -> BatchResult:
        return next(self._results)

    def close(self) -> None:
        """Stop the batch: no further request starts; requests in flight finish on their own."""
        self._results.close()

    @property
    def stats(self) -> BatchStats:
        """The batch's figures so far (final once it is over)."""
        return self._tally.snapshot()


class AsyncBatchIterator(AsyncIterator[BatchResult]):
    """What async ``complete_many`` returns: ``async for`` its results, ``aclose()``, and live ``stats``."""

    def __init__(self, results: AsyncGenerator[BatchResult, None], tally: Tally) -> None:
        self._results = results
        self._tally = tally

    async def __anext__(self) -> BatchResult:
        return await anext(self._results)

    async def aclose(self) -> None:
        """Stop the batch and cancel the requests in flight."""
        await self._results.aclose()

    @property
    def stats(self) -> BatchStats:
        """The batch's figures so far (final once it is over)."""
        return self._tally.snapshot()


def complete_many(
    client: SyncClient,
    model: str,
    prompts: Iterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    budget: Budget | None = None,
    **kwargs: Any,
) -> BatchIterator:
    """``client.complete(model, prompt, **kwargs)`` for every prompt, at most ``concurrency`` in flight,
    results as they finish (the clients' ``complete_many``).

    ``prompts`` is read lazily, at most ``concurrency`` ahead of the results handed back. ``ordered=True``
    yields results in input order instead. A failed prompt raises its ``APIError`` at once unless
    ``return_exceptions=True``, which yields it as a result. Requests are paced evenly to
    ``requests_per_minute`` and ``tokens_per_minute`` (tokens are estimated) and slow down on 429s;
    each prompt gets the client's ``max_retries``. Breaking out of the loop (or ``close()``) stops the
    batch; requests already sent finish on their own. With a ``budget``, the batch ends once it is
    reached: the prompts it held back get no result, and the prompts in flight finish.
    """
    _check_arguments(prompts, concurrency, budget)
    pacer = Pacer(requests_per_minute, tokens_per_minute)
    params, options = _split(kwargs)
    client = client.with_options(**options) if options else client
    complete = functools.partial(getattr(client, "complete"), model)  # noqa: B009
    batch = _Batch(complete, functools.partial(_Paced, pacer), budget)
    return BatchIterator(
        _run(batch, _numbered(prompts, params), concurrency, ordered, return_exceptions), batch.tally
    )


def complete_with(
    complete: Callable[..., Completion],
    prompts: Iterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    budget: Budget | None = None,
    **kwargs: Any,
) -> BatchIterator:
    """``complete(prompt, **kwargs)`` for every prompt, as ``complete_many`` runs them, with no pacing of
    the batch's own: a router's ``complete`` (``wrapper.router``), whose routes pace themselves.

    ``complete`` passes its ``hooks`` option on to the clients' calls it makes: the batch counts their
    attempts (and each route's, in ``BatchStats.routes``) and asks the ``budget`` before each prompt's
    first.
    """
    _check_arguments(prompts, concurrency, budget)
    batch = _Batch(complete, _Counted, budget)
    return BatchIterator(
        _run(batch, _numbered(prompts, kwargs), concurrency, ordered, return_exceptions), batch.tally
    )


def acomplete_many(
    client: AsyncClient,
    model: str,
    prompts: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    budget: Budget | None = None,
    **kwargs: Any,
) -> AsyncBatchIterator:
    """The async ``complete_many``: prompts from an iterable or an async iterable, results by ``async for``.

    Leaving the loop early and closing the iterator (``aclose()``, or ``contextlib.aclosing``) cancels
    the requests in flight.
    """
    _check_arguments(prompts, concurrency, budget)
    params, options = _split(kwargs)
    return acomplete_jobs(
        client.with_options(**options) if options else client,
        model,
        _jobs(prompts, params),
        concurrency=concurrency,
        ordered=ordered,
        return_exceptions=return_exceptions,
        requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
        budget=budget,
    )


def acomplete_with(
    complete: Callable[..., Awaitable[Completion]],
    prompts: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    budget: Budget | None = None,
    **kwargs: Any,
) -> AsyncBatchIterator:
    """The async ``complete_with``: ``await complete(prompt, **kwargs)`` for every prompt (an async
    router's ``complete``), prompts from an iterable or an async iterable."""
    _check_arguments(prompts, concurrency, budget)
    batch = _Batch(complete, _Counted, budget)
    return AsyncBatchIterator(
        _arun(batch, _jobs(prompts, kwargs), concurrency, ordered, return_exceptions), batch.tally
    )


def acomplete_jobs(
    client: AsyncClient | AsyncCompleter,
    model: str | None,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    *,
    concurrency: int,
    ordered: bool = False,
    return_exceptions: bool = False,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    limiter: Limiter | None = None,
    budget: Budget | None = None,
) -> AsyncBatchIterator:
    """``acomplete_many`` over explicit jobs, each with its own index and parameters (the command line's
    batch, Ray's blocks). ``limiter`` paces the batch instead of the limits (one shared by many
    processes, say: ``wrapper.ray``'s leases). With ``model`` None, ``client`` is an async router
    (``wrapper.router``), whose routes pace themselves: no limit nor limiter is taken then.
    """
    _check_arguments(jobs, concurrency, budget)
    complete = getattr(client, "complete")  # noqa: B009  (a client's takes the model first)
    if model is None:
        if limiter is not None or requests_per_minute is not None or tokens_per_minute is not None:
            raise ValueError("a router paces each route to its own limits: pass no limit nor limiter")
        batch = _Batch(complete, _Counted, budget)
    else:
        if limiter is None:
            limiter = Pacer(requests_per_minute, tokens_per_minute)
        elif requests_per_minute is not None or tokens_per_minute is not None:
            raise ValueError("pass requests_per_minute/tokens_per_minute or a limiter, not both")
        batch = _Batch(functools.partial(complete, model), functools.partial(_APaced, limiter), budget)
    return AsyncBatchIterator(_arun(batch, jobs, concurrency, ordered, return_exceptions), batch.tally)


class AsyncCompleter(Protocol):
    """What ``acomplete_jobs`` takes with no model: an async router (``wrapper.router``), whose
    ``complete(prompt, **params)`` paces its routes itself."""

    def complete(self, prompt: str, **params: Any) -> Awaitable[Completion]: ...


def _split(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A batch's keyword arguments as (each prompt's parameters, the request options for all of them)."""
    params = {name: value for name, value in kwargs.items() if name not in _OPTIONS}
    return params, {name: value for name, value in kwargs.items() if name in _OPTIONS}


def _check_arguments(prompts: object, concurrency: int, budget: object = None) -> None:
    if isinstance(prompts, str):
        raise TypeError("prompts must be an iterable of strings, not one string")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a wrapper.batch.Budget (or None), got {type(budget).__name__}")


def _numbered(prompts: Iterable[str], params: Mapping[str, Any]) -> Iterator[Job]:
    return ((index, prompt, params) for index, prompt in enumerate(prompts))


def _jobs(
    prompts: Iterable[str] | AsyncIterable[str], params: Mapping[str, Any]
) -> Iterator[Job] | AsyncGenerator[Job, None]:
    return _anumbered(prompts, params) if isinstance(prompts, AsyncIterable) else _numbered(prompts, params)


async def _anumbered(prompts: AsyncIterable[str], params: Mapping[str, Any]) -> AsyncGenerator[Job, None]:
    index = 0
    async for prompt in prompts:
        yield index, prompt, params
        index += 1


def _checked(job: Job) -> Job:
    if not isinstance(job[1], str):
        raise TypeError(f"prompts must be strings, got {type(job[1]).__name__} at index {job[0]}")
    return job


class _Prompt:
    """One prompt's attempts so far, over every call made for it (a router makes one per route), and the
    tokens it booked with the batch's budget (None: not admitted yet)."""

    __slots__ = ("booked", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.booked: int | None = None


class _Batch:
    """What a batch's prompts share: how one is completed, the hooks of its calls, the tally, the budget,
    and (for a sync batch) the event that ends it."""

    def __init__(
        self,
        complete: Callable[..., Any],
        hooks: Callable[[_Batch, _Prompt, CallInfo], CallHooks],
        budget: Budget | None = None,
    ) -> None:
        self.complete = complete
        self.hooks = hooks
        self.budget = budget
        self.tally = Tally()
        self.stop = threading.Event()
        self.context = contextvars.copy_context()  # the caller's: its current span is each prompt's parent

    def call(self, job: Job) -> tuple[Callable[..., Any], str, dict[str, Any], _Prompt]:
        """A job's ``complete``, its prompt and keyword arguments (its parameters, the batch's hooks), and
        the state of its attempts."""
        _, prompt, params = job
        state = _Prompt()
        hooks = functools.partial(self.hooks, self, state)
        return self.complete, prompt, {**params, "hooks": [*params.get("hooks", ()), hooks]}, state

    def result(
        self, index: int, completion: Completion | None = None, error: APIError | None = None
    ) -> BatchResult:
        """The result of the job numbered ``index``."""
        return BatchResult(index, completion, error)

    def held_back(self) -> bool:
        """Whether the budget stopped the batch: no more jobs start."""
        return self.budget is not None and self.budget.reached

    def counted(self, completion: Completion) -> Completion:
        self.tally.completed(completion)
        return completion

    def ended(self, state: _Prompt, error: BaseException | None) -> None:
        """A prompt's call is over: a failure counted by its type, an unspent booking given back."""
        if isinstance(error, APIError):
            self.tally.failure(type(error).__name__)
        if state.booked is not None and self.budget is not None:
            self.budget.release(state.booked)


class _Counted(CallHooks):
    """A batch call's hooks: every attempt counted (a route's in its own figures too), 429s forgiven.

    A 429 met the batch's own pace, which the limiter lowers for it (and pauses for its
    Retry-After): it costs no retry, up to ``FORGIVEN_429S`` times per prompt. A sync batch's
    attempt still waiting when the batch ends is not sent, nor a prompt's first when the budget
    says no.
    """

    def __init__(self, batch: _Batch, prompt: _Prompt, call: CallInfo) -> None:
        super().__init__(call)
        self.route = None if call.route is None else batch.tally.route(call.route)
        self.tallies = (batch.tally,) if self.route is None else (batch.tally, self.route)
        self.stop = batch.stop
        self.budget = batch.budget
        self.prompt = prompt
        self.estimate = estimate_tokens(call.prompt, call.params, call.client.API.max_tokens)
        self.forgiven = 0
        self.sent_at = 0.0

    def before(self) -> None:
        if self.stop.is_set():  # a retry's wait ended after the batch did
            raise _Stopped
        if self.budget is not None and self.prompt.booked is None:  # the prompt's first attempt
            if not self.budget.admit(self.estimate):
                raise _HeldBack
            self.prompt.booked = self.estimate
        self.sent_at = time.monotonic()
        retry, self.prompt.sent = self.prompt.sent > 0, self.prompt.sent + 1
        for tally in self.tallies:
            tally.sent()
            if retry:
                tally.add("retries")

    def _answered(self) -> None:
        for tally in self.tallies:
            tally.answered(time.monotonic() - self.sent_at)

    def succeeded(self, completion: Completion | None) -> None:
        self._answered()
        if self.route is not None and completion is not None:
            self.route.completed(completion)
        if self.budget is not None and self.prompt.booked is not None:
            self.budget.settle(self.prompt.booked, self._used(completion))
            self.prompt.booked = None

    def _used(self, completion: Completion | None) -> int:
        """The tokens a success used (as reported, else the estimate)."""
        if completion is None or completion.prompt_tokens is None or completion.response_tokens is None:
            return self.estimate
        return completion.prompt_tokens + completion.response_tokens

    def failed(self, error: APIError) -> bool:
        self._answered()
        if not isinstance(error, RateLimitError):
            return False
        for tally in self.tallies:
            tally.add("rate_limited")
        if self.forgiven >= FORGIVEN_429S:
            return False
        self.forgiven += 1
        return True

    def finished(self, error: BaseException | None) -> None:
        if self.route is not None and isinstance(error, APIError):
            self.route.failure(type(error).__name__)


class _Paced(_Counted):
    """A sync batch call's hooks: each attempt waits for the ``Pacer``, and stops when the batch does."""

    def __init__(self, pacer: Pacer, batch: _Batch, prompt: _Prompt, call: CallInfo) -> None:
        super().__init__(batch, prompt, call)
        self.pacer = pacer

    def before(self) -> None:
        for wait in self.pacer.turns(self.estimate):
            if self.stop.wait(wait):
                raise _Stopped
        super().before()

    def succeeded(self, completion: Completion | None) -> None:
        super().succeeded(completion)
        self.pacer.correct(self.estimate, self._used(completion))

    def failed(self, error: APIError) -> bool:
        if isinstance(error, RateLimitError):
            self.pacer.slow_down(_retry_after(error))
        return super().failed(error)


class _APaced(_Counted):
    """An async batch call's hooks: each attempt waits for the ``Limiter`` (a ``Pacer``, or Ray's)."""

    def __init__(self, limiter: Limiter, batch: _Batch, prompt: _Prompt, call: CallInfo) -> None:
        super().__init__(batch, prompt, call)
        self.limiter = limiter

    async def abefore(self) -> None:
        await self.limiter.acquire(self.estimate)
        self.before()

    async def asucceeded(self, completion: Completion | None) -> None:
        self.succeeded(completion)
        await self.limiter.settle(self.estimate, self._used(completion))

    async def afailed(self, error: APIError) -> bool:
        if isinstance(error, RateLimitError):
            await self.limiter.throttled(_retry_after(error))
        return self.failed(error)


def _retry_after(error: APIError) -> float | None:
    return error.retry_after if isinstance(error, APIStatusError) else None


class _Pending(Protocol):
    """A request in flight: a ``concurrent.futures.Future`` or an ``asyncio.Task``."""

    def done(self) -> bool: ...

    def result(self) -> Completion: ...


F = TypeVar("F", bound=_Pending)


class _Window(Generic[F]):
    """The requests in flight, in start order; hands back the finished ones in the order they are due."""

    def __init__(self, ordered: bool) -> None:
        self._ordered = ordered
        self._pending: dict[F, int] = {}  # insertion-ordered: start order

    def __len__(self) -> int:
        return len(self._pending)

    def __iter__(self) -> Iterator[F]:
        return iter(self._pending)

    def add(self, future: F, index: int) -> None:
        self._pending[future] = index

    def pop_done(self) -> Iterator[tuple[int, F]]:
        """Remove and yield, one at a time, the finished requests that may be handed back now.

        One at a time: those a consumer stops before are still in the window, so the batch's end
        collects them (and their errors) with the rest.
        """
        for future in list(self._pending):
            if not future.done():
                if self._ordered:
                    return
                continue
            yield self._pending.pop(future), future


def _result(batch: _Batch, index: int, future: _Pending, keep: bool) -> BatchResult | None:
    """The job's result; None for a prompt the budget held back (it has none: it was not sent)."""
    try:
        return batch.result(index, completion=future.result())
    except _HeldBack:
        return None
    except APIError as exc:
        if not keep:
            raise
        return batch.result(index, error=exc)
    except (TypeError, ValueError) as exc:  # refused before sending: say which prompt
        if type(exc) in (TypeError, ValueError) and exc.args and isinstance(exc.args[0], str):
            exc.args = (f"{exc.args[0]} (the prompt at index {index})", *exc.args[1:])
        raise


class _Stopped(BaseException):
    """The batch ended while this request was waiting for its turn (like a cancelled task: no failure)."""


class _HeldBack(BaseException):
    """The budget said no to this prompt as it was about to be sent: no request, no result."""


def _complete(batch: _Batch, job: Job) -> Completion:
    """One prompt in a worker thread: its ``complete``, paced and counted by the batch's hooks."""
    complete, prompt, kwargs, state = batch.call(job)
    error: BaseException | None = None
    try:
        return batch.counted(complete(prompt, **kwargs))
    except BaseException as exc:
        error = exc
        raise
    finally:
        batch.ended(state, error)


class _Workers:
    """Daemon threads that run a sync batch's requests: started as the window fills, never joined.

    Only the consuming thread reads the user's prompts; workers take jobs from a queue and settle
    each job's future. A thread blocked in I/O when the batch ends is left to finish on its own
    (its result is dropped), so neither the batch nor the interpreter's exit ever waits for it.
    """

    def __init__(self, limit: int, work: Callable[[Job], Completion], context: contextvars.Context) -> None:
        self._limit = limit
        self._work = work
        self._context = context  # each worker runs in a copy of it (a context is entered by one thread)
        self._jobs: SimpleQueue[tuple[Job, Future[Completion]] | None] = SimpleQueue()
        self._started = 0

    def submit(self, job: Job) -> Future[Completion]:
        future: Future[Completion] = Future()
        if self._started < self._limit:
            self._started += 1
            name = f"complete_many-{self._started}"
            serve = self._context.copy().run
            threading.Thread(target=serve, args=(self._serve,), name=name, daemon=True).start()
        self._jobs.put((job, future))
        return future

    def stop(self) -> None:
        """Let every worker exit once it is idle (a worker in I/O exits after its request)."""
        for _ in range(self._started):
            self._jobs.put(None)

    def _serve(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, future = item
            try:
                future.set_result(self._work(job))
            except BaseException as exc:  # handed to the consumer, which re-raises it
                future.set_exception(exc)


def _run(
    batch: _Batch,
    jobs: Iterable[Job],
    concurrency: int,
    ordered: bool,
    keep: bool,
) -> Generator[BatchResult, None, None]:
    window: _Window[Future[Completion]] = _Window(ordered)
    finished: SimpleQueue[object] = SimpleQueue()
    pending_jobs = iter(jobs)
    workers = _Workers(concurrency, functools.partial(_complete, batch), batch.context)
    batch.tally.start()
    try:
        while True:
            while (
                len(window) < concurrency
                and not batch.held_back()
                and (job := next(pending_jobs, None)) is not None
            ):
                future = workers.submit(_checked(job))
                future.add_done_callback(finished.put)
                window.add(future, job[0])
            if not window:
                return
            finished.get()  # one more has finished (or one already handed back: then this round yields none)
            for index, future in window.pop_done():
                if (result := _result(batch, index, future, keep)) is not None:
                    yield result
    finally:
        batch.tally.end()
        batch.stop.set()
        workers.stop()


async def _acomplete(batch: _Batch, job: Job) -> Completion:
    """One prompt as a task: its ``complete``, paced and counted by the batch's hooks."""
    complete, prompt, kwargs, state = batch.call(job)
    error: BaseException | None = None
    try:
        return batch.counted(await complete(prompt, **kwargs))
    except BaseException as exc:
        error = exc
        raise
    finally:
        batch.ended(state, error)


async def _arun(
    batch: _Batch,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    concurrency: int,
    ordered: bool,
    keep: bool,
) -> AsyncGenerator[BatchResult, None]:
    window: _Window[asyncio.Task[Completion]] = _Window(ordered)
    finished: asyncio.Queue[object] = asyncio.Queue()
    batch.tally.start()
    try:
        while True:
            while len(window) < concurrency and not batch.held_back():
                job = await anext(jobs, None) if isinstance(jobs, AsyncGenerator) else next(jobs, None)
                if job is None:
                    break
                task = asyncio.create_task(_acomplete(batch, _checked(job)))
                task.add_done_callback(finished.put_nowait)
                window.add(task, job[0])
            if not window:
                return
            await finished.get()
            for index, task in window.pop_done():
                if (result := _result(batch, index, task, keep)) is not None:
                    yield result
    finally:
        batch.tally.end()
        tasks = list(window)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(jobs, AsyncGenerator):
            await jobs.aclose()
