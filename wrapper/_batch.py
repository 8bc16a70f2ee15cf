"""Many prompts through one client with bounded concurrency: ``complete_many`` and ``acomplete_many``.

Prompts are pulled lazily, never more than ``concurrency`` ahead of the results handed back, so a
million prompts from a file never sit in memory. Requests go out with the client's own retries off;
retries happen here instead, so that a 429 pauses the whole batch (every worker waits behind one
shared gate until the Retry-After has passed) rather than each request backing off on its own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import Future
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs

from wrapper._retry import is_retryable, retry_delay
from wrapper.errors import APIError, RateLimitError

if TYPE_CHECKING:
    from wrapper._results import Completion

__all__ = ["BatchResult", "acomplete_many", "complete_many"]

Job = tuple[int, str, Mapping[str, Any]]
"""One unit of work: the index results carry, the prompt, the keyword arguments for ``complete``."""


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


class Completer(Protocol):
    """What a batch needs of a client: any of the four; ``complete`` is awaited for the async ones."""

    @property
    def max_retries(self) -> int: ...

    def with_options(self, *, max_retries: int) -> Completer: ...

    @property
    def complete(self) -> Callable[..., Any]: ...


def complete_many(
    client: Completer,
    model: str,
    prompts: Iterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    **params: Any,
) -> Generator[BatchResult, None, None]:
    """Complete every prompt with at most ``concurrency`` requests in flight, yielding results as they finish.

    ``prompts`` is read lazily, at most ``concurrency`` ahead of the results handed back. ``ordered=True``
    yields results in input order instead. A failed prompt raises its ``APIError`` (after the rest
    are cancelled) unless ``return_exceptions=True``, which yields it as a result. Each prompt gets
    the client's ``max_retries``; a 429 pauses every worker until its Retry-After has passed.
    Breaking out of the loop (or ``close()``) stops the batch; requests already sent are let finish.
    """
    _check_arguments(prompts, concurrency)
    jobs = ((index, prompt, params) for index, prompt in enumerate(prompts))
    return _run(client, model, jobs, concurrency, ordered, return_exceptions)


def acomplete_many(
    client: Completer,
    model: str,
    prompts: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    **params: Any,
) -> AsyncGenerator[BatchResult, None]:
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
        client, model, jobs, concurrency=concurrency, ordered=ordered, return_exceptions=return_exceptions
    )


def acomplete_jobs(
    client: Completer,
    model: str,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    *,
    concurrency: int,
    ordered: bool,
    return_exceptions: bool,
) -> AsyncGenerator[BatchResult, None]:
    """``acomplete_many`` over explicit jobs, each with its own index and parameters (the CLI's batch)."""
    _check_arguments(jobs, concurrency)
    return _arun(client, model, jobs, concurrency, ordered, return_exceptions)


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


def _backoff(exc: APIError, attempt: int, budget: int, pause_all: Callable[[float], None]) -> float:
    """After failed attempt ``attempt``: re-raise ``exc`` when out of retries, else the seconds to wait.

    A 429 pauses the whole batch through ``pause_all`` (and returns 0); other retryable errors
    delay only their own request.
    """
    if attempt >= budget or not is_retryable(exc):
        raise exc
    delay = retry_delay(attempt, getattr(exc, "retry_after", None))
    if isinstance(exc, RateLimitError):
        pause_all(delay)
        return 0.0
    return delay


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

    def pop_done(self) -> list[tuple[int, F]]:
        """Remove and return the finished requests that may be handed back now."""
        done = []
        for future in list(self._pending):
            if not future.done():
                if self._ordered:
                    break
                continue
            done.append((self._pending.pop(future), future))
        return done


def _result(index: int, future: _Pending, keep: bool) -> BatchResult:
    try:
        return BatchResult(index, completion=future.result())
    except APIError as exc:
        if not keep:
            raise
        return BatchResult(index, error=exc)


class _Stopped(Exception):
    """The batch ended while this request was waiting for its turn."""


class _Gate:
    """Holds the workers of a sync batch while a shared pause (after a 429) lasts, and once it has ended."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._until = 0.0
        self._stopped = False

    def pause(self, seconds: float) -> None:
        with self._changed:
            self._until = max(self._until, time.monotonic() + seconds)

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def wait(self, seconds: float = 0.0) -> None:
        """Wait ``seconds`` and for any shared pause; raise ``_Stopped`` once the batch has ended."""
        deadline = time.monotonic() + seconds
        with self._changed:
            while not self._stopped and (left := max(deadline, self._until) - time.monotonic()) > 0:
                self._changed.wait(left)
            if self._stopped:
                raise _Stopped


def _attempt(call: Callable[..., Any], model: str, job: Job, budget: int, gate: _Gate) -> Completion:
    _, prompt, params = job
    attempt, own_wait = 0, 0.0
    while True:
        gate.wait(own_wait)
        try:
            completion: Completion = call(model, prompt, **params)
            return completion
        except APIError as exc:
            own_wait = _backoff(exc, attempt, budget, gate.pause)
        attempt += 1


class _Workers:
    """Daemon threads that run a sync batch's requests: started as the window fills, never joined.

    Only the consuming thread reads the user's prompts; workers take jobs from a queue and settle
    each job's future. A thread blocked in I/O when the batch ends is left to finish on its own
    (its result is dropped), so neither the batch nor the interpreter's exit ever waits for it.
    """

    def __init__(self, limit: int, work: Callable[[Job], Completion]) -> None:
        self._limit = limit
        self._work = work
        self._jobs: SimpleQueue[tuple[Job, Future[Completion]] | None] = SimpleQueue()
        self._started = 0

    def submit(self, job: Job) -> Future[Completion]:
        future: Future[Completion] = Future()
        if self._started < self._limit:
            self._started += 1
            name = f"complete_many-{self._started}"
            threading.Thread(target=self._serve, name=name, daemon=True).start()
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
    client: Completer,
    model: str,
    jobs: Iterable[Job],
    concurrency: int,
    ordered: bool,
    keep: bool,
) -> Generator[BatchResult, None, None]:
    call = client.with_options(max_retries=0).complete
    budget = client.max_retries
    gate = _Gate()
    window: _Window[Future[Completion]] = _Window(ordered)
    finished: SimpleQueue[object] = SimpleQueue()
    pending_jobs = iter(jobs)
    workers = _Workers(concurrency, lambda job: _attempt(call, model, job, budget, gate))
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
        gate.stop()
        workers.stop()


class _AsyncGate:
    """``_Gate`` for one event loop: holds the tasks of an async batch while a shared pause lasts."""

    def __init__(self) -> None:
        self._until = 0.0

    def pause(self, seconds: float) -> None:
        self._until = max(self._until, time.monotonic() + seconds)

    async def wait(self, seconds: float = 0.0) -> None:
        deadline = time.monotonic() + seconds
        # Sleep again while a later 429 has pushed the pause further: a deadline, not an event.
        while (left := max(deadline, self._until) - time.monotonic()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)


async def _aattempt(
    call: Callable[..., Any], model: str, job: Job, budget: int, gate: _AsyncGate
) -> Completion:
    _, prompt, params = job
    attempt, own_wait = 0, 0.0
    while True:
        await gate.wait(own_wait)
        try:
            completion: Completion = await call(model, prompt, **params)
            return completion
        except APIError as exc:
            own_wait = _backoff(exc, attempt, budget, gate.pause)
        attempt += 1


async def _arun(
    client: Completer,
    model: str,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    concurrency: int,
    ordered: bool,
    keep: bool,
) -> AsyncGenerator[BatchResult, None]:
    call = client.with_options(max_retries=0).complete
    budget = client.max_retries
    gate = _AsyncGate()
    window: _Window[asyncio.Task[Completion]] = _Window(ordered)
    finished: asyncio.Queue[object] = asyncio.Queue()
    try:
        while True:
            while len(window) < concurrency:
                job = await anext(jobs, None) if isinstance(jobs, AsyncGenerator) else next(jobs, None)
                if job is None:
                    break
                task = asyncio.create_task(_aattempt(call, model, _checked(job), budget, gate))
                task.add_done_callback(finished.put_nowait)
                window.add(task, job[0])
            if not window:
                return
            await finished.get()
            for index, task in window.pop_done():
                yield _result(index, task, keep)
    finally:
        tasks = list(window)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(jobs, AsyncGenerator):
            await jobs.aclose()
