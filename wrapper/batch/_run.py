"""Many prompts through one client with bounded concurrency: ``complete_many`` and ``acomplete_many``.

Prompts are pulled lazily, never more than ``concurrency`` ahead of the results handed back, so a
million prompts from a file never sit in memory. Each prompt goes through the client's own attempt
loop (``wrapper._core.retries``) with a policy of the batch's: every attempt waits for a limiter
(``wrapper.batch._pacing``: requests and tokens per minute when given, slowing down on 429s, a 429's
Retry-After pausing every request rather than one), and is counted in the batch's stats.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from concurrent.futures import Future
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import attrs
import httpx

from wrapper._core.results import Completion
from wrapper._core.retries import Attempts
from wrapper._core.retry import retry_or_raise, waited
from wrapper._generated.exceptions import APIError, APIStatusError, RateLimitError

from ._pacing import Limiter, Pacer, estimate_tokens
from ._stats import BatchStats, Tally

if TYPE_CHECKING:
    from wrapper._core.client import AsyncClient, SyncClient

__all__ = [
    "AsyncBatchIterator",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "acomplete_jobs",
    "acomplete_many",
    "complete_many",
]

Job = tuple[int, str, Mapping[str, Any]]
"""One unit of work: the index results carry, the prompt, the keyword arguments for ``complete``."""
FORGIVEN_429S = 10
"""At most this many of a prompt's 429s cost no retry (each slows the batch down): none retries for ever."""


@attrs.frozen
class BatchResult:
    """One prompt's outcome: its index in the input and either its completion or its typed error."""

    index: int
    completion: Completion | None = None
    error: APIError | None = None

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
        response = getattr(self.error, "response", None)
        return response.headers if isinstance(response, httpx.Response) else httpx.Headers()

    @property
    def request_id(self) -> str | None:
        """The final response's ``x-request-id``, for the provider's support."""
        return self.headers.get("x-request-id")


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
    params: Mapping[str, Any],
    concurrency: int,
    ordered: bool,
    return_exceptions: bool,
    limits: tuple[float | None, float | None],
) -> BatchIterator:
    """``client.complete`` for every prompt with at most ``concurrency`` in flight, results as they finish.

    ``prompts`` is read lazily, at most ``concurrency`` ahead of the results handed back. ``ordered=True``
    yields results in input order instead. A failed prompt raises its ``APIError`` at once unless
    ``return_exceptions=True``, which yields it as a result. Requests are paced evenly to ``limits``
    (requests and tokens per minute, each None for none; tokens are estimated: ``wrapper.batch._pacing``)
    and slow down on 429s; each prompt gets the client's ``max_retries``. Breaking out of the loop
    (or ``close()``) stops the batch; requests already sent finish on their own.
    """
    _check_arguments(prompts, concurrency)
    pacer = Pacer(*limits)
    jobs = ((index, prompt, params) for index, prompt in enumerate(prompts))
    batch = _Batch(client, model, Tally())
    return BatchIterator(_run(batch, pacer, jobs, concurrency, ordered, return_exceptions), batch.tally)


def acomplete_many(
    client: AsyncClient,
    model: str,
    prompts: Iterable[str] | AsyncIterable[str],
    params: Mapping[str, Any],
    concurrency: int,
    ordered: bool,
    return_exceptions: bool,
    limits: tuple[float | None, float | None],
) -> AsyncBatchIterator:
    """The async ``complete_many``: prompts from an iterable or an async iterable, results by ``async for``.

    Leaving the loop early and closing the iterator (``aclose()``, or ``contextlib.aclosing``) cancels
    the requests in flight.
    """
    _check_arguments(prompts, concurrency)
    if isinstance(prompts, AsyncIterable):
        jobs: Iterator[Job] | AsyncGenerator[Job, None] = _anumbered(prompts, params)
    else:
        jobs = ((index, prompt, params) for index, prompt in enumerate(prompts))
    return acomplete_jobs(
        client,
        model,
        jobs,
        concurrency=concurrency,
        ordered=ordered,
        return_exceptions=return_exceptions,
        requests_per_minute=limits[0],
        tokens_per_minute=limits[1],
    )


def acomplete_jobs(
    client: AsyncClient,
    model: str,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    *,
    concurrency: int,
    ordered: bool,
    return_exceptions: bool,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    limiter: Limiter | None = None,
) -> AsyncBatchIterator:
    """``acomplete_many`` over explicit jobs, each with its own index and parameters (the CLI's batch).

    ``limiter`` paces the batch instead of the limits (one shared by many processes, say).
    """
    _check_arguments(jobs, concurrency)
    if limiter is None:
        limiter = Pacer(requests_per_minute, tokens_per_minute)
    elif requests_per_minute is not None or tokens_per_minute is not None:
        raise ValueError("pass requests_per_minute/tokens_per_minute or a limiter, not both")
    batch = _Batch(client, model, Tally())
    return AsyncBatchIterator(
        _arun(batch, limiter, jobs, concurrency, ordered, return_exceptions), batch.tally
    )


def _check_arguments(prompts: object, concurrency: int) -> None:
    if isinstance(prompts, str):
        raise TypeError("prompts must be an iterable of strings, not one string")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")


async def _anumbered(prompts: AsyncIterable[str], params: Mapping[str, Any]) -> AsyncGenerator[Job, None]:
    index = 0
    async for prompt in prompts:
        yield index, prompt, params
        index += 1


def _checked(job: Job) -> Job:
    if not isinstance(job[1], str):
        raise TypeError(f"prompts must be strings, got {type(job[1]).__name__} at index {job[0]}")
    return job


class _Batch:
    """What a batch's prompts share: the client, the model, the retry budget and the tally."""

    def __init__(self, client: SyncClient | AsyncClient, model: str, tally: Tally) -> None:
        self.client = client
        self.model = model
        self.tally = tally
        self.context = contextvars.copy_context()  # the caller's: its current span is each prompt's parent

    def estimate(self, prompt: str, params: Mapping[str, Any]) -> int:
        return estimate_tokens(prompt, params, self.client.API.max_tokens)


class _Counted(Attempts):
    """A batch prompt's policy: every attempt counted, 429s slowing the batch down, not retries.

    A 429 met the batch's own pace, which the limiter lowers for it (and pauses for its
    Retry-After): it costs no retry, up to ``FORGIVEN_429S`` times per prompt.
    """

    paced = True

    def __init__(self, batch: _Batch, estimate: int) -> None:
        super().__init__(batch.client.options)
        self.batch = batch
        self.estimate = estimate
        self.forgiven = 0
        self.sent_at = 0.0

    def _sent(self) -> None:
        self.sent_at = time.monotonic()
        self.batch.tally.sent()

    def _answered(self) -> None:
        self.batch.tally.answered(time.monotonic() - self.sent_at)

    def _used(self, completion: Completion) -> int:
        """Count a success; the tokens it used (as reported, else the estimate)."""
        self.batch.tally.completed(completion)
        if completion.prompt_tokens is None or completion.response_tokens is None:
            return self.estimate
        return completion.prompt_tokens + completion.response_tokens

    def failed(self, error: APIError) -> float:
        tally = self.batch.tally
        counted = True
        if isinstance(error, RateLimitError):
            tally.add("rate_limited")
            counted = self.forgiven >= FORGIVEN_429S
        # A forgiven 429 is retried even when the budget is spent (unless there is none at all).
        retries = self.retries if counted else min(self.retries, max(self.max_retries - 1, 0))
        try:
            delay = retry_or_raise(error, retries, self.max_retries, self.options.retry)
        except APIError:
            tally.add("failed")
            raise
        tally.add("retries")
        if counted:
            self.retries += 1
        else:
            self.forgiven += 1
        return self.deadline_allows(error, delay)


class _Paced(_Counted):
    """A sync batch prompt's policy: each attempt waits for the ``Pacer``, and stops when the batch does."""

    def __init__(self, batch: _Batch, estimate: int, pacer: Pacer, stop: threading.Event) -> None:
        super().__init__(batch, estimate)
        self.pacer = pacer
        self.stop = stop

    def before(self) -> None:
        for wait in self.pacer.turns(self.estimate):
            if self.stop.wait(wait):
                raise _Stopped
        self._sent()

    def succeeded(self, result: object) -> None:
        self._answered()
        assert isinstance(result, Completion)
        self.pacer.correct(self.estimate, self._used(result))

    def failed(self, error: APIError) -> float:
        self._answered()
        if isinstance(error, RateLimitError):
            self.pacer.slow_down(_retry_after(error))
        return super().failed(error)

    def wait(self, seconds: float) -> None:
        if self.stop.wait(waited(seconds)):
            raise _Stopped


class _APaced(_Counted):
    """An async batch prompt's policy: each attempt waits for the ``Limiter`` (a ``Pacer``, or Ray's)."""

    def __init__(self, batch: _Batch, estimate: int, limiter: Limiter) -> None:
        super().__init__(batch, estimate)
        self.limiter = limiter

    async def abefore(self) -> None:
        await self.limiter.acquire(self.estimate)
        self._sent()

    async def asucceeded(self, result: object) -> None:
        self._answered()
        assert isinstance(result, Completion)
        await self.limiter.settle(self.estimate, self._used(result))

    async def afailed(self, error: APIError) -> float:
        self._answered()
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


def _result(index: int, future: _Pending, keep: bool) -> BatchResult:
    try:
        return BatchResult(index, completion=future.result())
    except APIError as exc:
        if not keep:
            raise
        return BatchResult(index, error=exc)


class _Stopped(BaseException):
    """The batch ended while this request was waiting for its turn (like a cancelled task: no failure)."""


def _attempts(batch: _Batch, pacer: Pacer, stop: threading.Event, job: Job) -> Completion:
    """One prompt in a worker thread: the client's attempt loop, paced, until it completes or fails."""
    _, prompt, params = job
    policy = _Paced(batch, batch.estimate(prompt, params), pacer, stop)
    client = cast("SyncClient", batch.client)
    completion: Completion = client._complete(batch.model, prompt, params, policy)
    return completion


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
    pacer: Pacer,
    jobs: Iterable[Job],
    concurrency: int,
    ordered: bool,
    keep: bool,
) -> Generator[BatchResult, None, None]:
    stop = threading.Event()
    window: _Window[Future[Completion]] = _Window(ordered)
    finished: SimpleQueue[object] = SimpleQueue()
    pending_jobs = iter(jobs)
    workers = _Workers(concurrency, lambda job: _attempts(batch, pacer, stop, job), batch.context)
    batch.tally.start()
    try:
        while True:
            while len(window) < concurrency and (job := next(pending_jobs, None)) is not None:
                future = workers.submit(_checked(job))
                future.add_done_callback(finished.put)
                window.add(future, job[0])
            if not window:
                return
            finished.get()  # one more has finished (or one already handed back: then this round yields none)
            for index, future in window.pop_done():
                yield _result(index, future, keep)
    finally:
        batch.tally.end()
        stop.set()
        workers.stop()


async def _aattempts(batch: _Batch, limiter: Limiter, job: Job) -> Completion:
    """One prompt as a task: the client's attempt loop, paced, until it completes or fails for good."""
    _, prompt, params = job
    policy = _APaced(batch, batch.estimate(prompt, params), limiter)
    client = cast("AsyncClient", batch.client)
    completion: Completion = await client._complete(batch.model, prompt, params, policy)
    return completion


async def _arun(
    batch: _Batch,
    limiter: Limiter,
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
            while len(window) < concurrency:
                job = await anext(jobs, None) if isinstance(jobs, AsyncGenerator) else next(jobs, None)
                if job is None:
                    break
                task = asyncio.create_task(_aattempts(batch, limiter, _checked(job)))
                task.add_done_callback(finished.put_nowait)
                window.add(task, job[0])
            if not window:
                return
            await finished.get()
            for index, task in window.pop_done():
                yield _result(index, task, keep)
    finally:
        batch.tally.end()
        tasks = list(window)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(jobs, AsyncGenerator):
            await jobs.aclose()
