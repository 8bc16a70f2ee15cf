"""Many prompts through one client with bounded concurrency: ``complete_many``, ``acomplete_many`` and
``acomplete_jobs``.

Prompts are pulled lazily, never more than ``concurrency`` ahead of the results handed back, so a
million prompts from a file never sit in memory. Each prompt is one call of the client (its ``call``:
the keyword arguments split and checked once for the batch), with hooks of the batch's
(``wrapper.CallHooks``): every attempt waits for a limiter (``wrapper.pacing``: requests and tokens
per minute when given, slowing down on 429s, a 429's Retry-After, as the retry policy cuts it, pausing
every request rather than one, none past its deadline), and is counted in the batch's stats. A
``Budget`` is asked as each prompt is about to be sent: once it says no, nothing more is sent and the
prompts in flight finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import json
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
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, Unpack, cast

import attrs
import httpx

from wrapper import CallHooks, CallInfo, Completion
from wrapper.errors import APIError, RateLimitError
from wrapper.pacing import (
    Limiter,
    LimitStore,
    Pacer,
    SharedLimit,
    estimate_tokens,
    limit_for,
    used_tokens,
    wait_turn,
)

from ._budget import Budget
from ._format import completion_fields, error_fields
from ._stats import BatchStats, Tally

if TYPE_CHECKING:
    from wrapper import AsyncClient, HookFactory, Options, RetryPolicy, SyncClient

__all__ = [
    "AsyncBatchIterator",
    "AsyncCompleter",
    "BatchIterator",
    "BatchOptions",
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


class BatchOptions(TypedDict, total=False):
    """What ``complete_many`` takes besides ``complete``'s keyword arguments."""

    concurrency: int
    """The most requests in flight at once (default: 16)."""
    ordered: bool
    """True: the results in input order; False (the default): as they finish."""
    return_exceptions: bool
    """True: a failed prompt's error is its result; False (the default): it is raised at once."""
    requests_per_minute: float | None
    """The request rate the batch is paced to, evenly (None, the default: none; 429s slow it down)."""
    tokens_per_minute: float | None
    """The token rate the batch is paced to, tokens estimated before each request (None: none)."""
    limit_store: LimitStore | str | None
    """Where the limits are kept (``wrapper.pacing``): a ``redis://`` URL or a ``RedisStore`` shares them
    (and, with no limit given, the rate found from 429s) with every process naming the same store and
    key; None (the default): this batch keeps them alone."""
    limit_key: str | None
    """The name of the limit in the store (None, the default: the client's API, base URL host and the
    model): callers naming one key share one limit, whatever they call."""
    budget: Budget | None
    """A cap on the prompts and tokens the batch sends (``wrapper.batch.Budget``; None: none). Once it
    is reached the batch ends: the prompts it held back get no result, those in flight finish."""


_DEFAULTS: BatchOptions = {
    "concurrency": 16,
    "ordered": False,
    "return_exceptions": False,
    "requests_per_minute": None,
    "tokens_per_minute": None,
    "limit_store": None,
    "limit_key": None,
    "budget": None,
}


def _batch_options(kwargs: dict[str, Any]) -> BatchOptions:
    """The ``BatchOptions`` among ``kwargs`` (taken out of them), each default filled in."""
    return cast(BatchOptions, {name: kwargs.pop(name, default) for name, default in _DEFAULTS.items()})


def complete_many(client: SyncClient, model: str, prompts: Iterable[str], **kwargs: Any) -> BatchIterator:
    """``client.complete(model, prompt, **kwargs)`` for every prompt, at most ``concurrency`` in flight,
    results as they finish (the clients' ``complete_many``; ``kwargs`` take ``BatchOptions`` too).

    ``prompts`` is read lazily, at most ``concurrency`` ahead of the results handed back. ``ordered=True``
    yields results in input order instead. A failed prompt raises its ``APIError`` at once unless
    ``return_exceptions=True``, which yields it as a result. Requests are paced evenly to
    ``requests_per_minute`` and ``tokens_per_minute`` (tokens are estimated) and slow down on 429s;
    each prompt gets the client's ``max_retries``. Breaking out of the loop (or ``close()``) stops the
    batch; requests already sent finish on their own. With a ``budget``, the batch ends once it is
    reached: the prompts it held back get no result, and the prompts in flight finish.
    """
    batch, params, given = _paced(client, model, prompts, kwargs, _Paced)
    return BatchIterator(_run(batch, _numbered(prompts, params), *_window(given)), batch.tally)


def complete_with(
    complete: Callable[..., Completion], prompts: Iterable[str], **kwargs: Any
) -> BatchIterator:
    """``complete(prompt, **kwargs)`` for every prompt, as ``complete_many`` runs them, with no pacing of
    the batch's own: a router's ``complete`` (``wrapper.router``), whose routes pace themselves.

    ``complete`` passes its ``hooks`` option on to the clients' calls it makes: the batch counts their
    attempts (and each route's, in ``BatchStats.routes``) and asks the ``budget`` before each prompt's
    first.
    """
    given = _unpaced(_batch_options(kwargs))
    _check_arguments(prompts, given["concurrency"], given["budget"])
    batch = _Batch(_routed(complete), _Counted, given["budget"], cached=True)
    return BatchIterator(_run(batch, _numbered(prompts, kwargs), *_window(given)), batch.tally)


def acomplete_many(
    client: AsyncClient, model: str, prompts: Iterable[str] | AsyncIterable[str], **kwargs: Any
) -> AsyncBatchIterator:
    """The async ``complete_many``: prompts from an iterable or an async iterable, results by ``async for``.

    Leaving the loop early and closing the iterator (``aclose()``, or ``contextlib.aclosing``) cancels
    the requests in flight.
    """
    batch, params, given = _paced(client, model, prompts, kwargs, _APaced)
    return AsyncBatchIterator(_arun(batch, _jobs(prompts, params), *_window(given)), batch.tally)


def acomplete_with(
    complete: Callable[..., Awaitable[Completion]], prompts: Iterable[str] | AsyncIterable[str], **kwargs: Any
) -> AsyncBatchIterator:
    """The async ``complete_with``: ``await complete(prompt, **kwargs)`` for every prompt (an async
    router's ``complete``), prompts from an iterable or an async iterable."""
    given = _unpaced(_batch_options(kwargs))
    _check_arguments(prompts, given["concurrency"], given["budget"])
    batch = _Batch(_routed(complete), _Counted, given["budget"], cached=True)
    return AsyncBatchIterator(_arun(batch, _jobs(prompts, kwargs), *_window(given)), batch.tally)


def acomplete_jobs(
    client: AsyncClient | AsyncCompleter,
    model: str | None,
    jobs: Iterator[Job] | AsyncGenerator[Job, None],
    *,
    limiter: Limiter | None = None,
    **kwargs: Unpack[BatchOptions],
) -> AsyncBatchIterator:
    """``acomplete_many`` over explicit jobs, each with its own index and parameters (the command line's
    batch, Ray's blocks). ``limiter`` paces the batch instead of the limits (one shared by many
    processes, say: ``wrapper.ray``'s leases). With ``model`` None, ``client`` is an async router
    (``wrapper.router``), whose routes pace themselves: no limit nor limiter is taken then.
    """
    given = _batch_options(dict(kwargs))
    budget = given["budget"]
    _check_arguments(jobs, given["concurrency"], budget)
    if model is None:
        if limiter is not None:
            raise ValueError("a router paces each route to its own limits: pass no limiter")
        _unpaced(given)
        batch = _Batch(_routed(cast("AsyncCompleter", client).complete), _Counted, budget, cached=True)
    else:
        if limiter is None:
            limiter = _limiter(client, model, given)
        elif any(given[name] is not None for name in _LIMITS):  # type: ignore[literal-required]
            raise ValueError(f"pass {'/'.join(_LIMITS)} or a limiter, not both")
        options = cast("AsyncClient", client).options
        hooks = functools.partial(_APaced, limiter, options.retry)
        batch = _Batch(_calls(client, model, options), hooks, budget, cached=options.cache is not None)
    return AsyncBatchIterator(_arun(batch, jobs, *_window(given)), batch.tally)


class AsyncCompleter(Protocol):
    """What ``acomplete_jobs`` takes with no model: an async router (``wrapper.router``), whose
    ``complete(prompt, **params)`` paces its routes itself."""

    def complete(self, prompt: str, **params: Any) -> Awaitable[Completion]: ...


def _paced(
    client: Any, model: str, prompts: object, kwargs: dict[str, Any], hooks: Callable[..., CallHooks]
) -> tuple[_Batch, dict[str, Any], BatchOptions]:
    """A client's batch, paced to its limits (``hooks``: the sync or async hooks that wait for them), each
    prompt's parameters, and the batch's options."""
    given = _batch_options(kwargs)
    _check_arguments(prompts, given["concurrency"], given["budget"])
    params, options = client.options.split(kwargs)
    paced = functools.partial(hooks, _limiter(client, model, given), options.retry)
    batch = _Batch(_calls(client, model, options), paced, given["budget"], cached=options.cache is not None)
    return batch, params, given


def _window(given: BatchOptions) -> tuple[int, bool, bool]:
    """How ``_run`` and ``_arun`` hand results back: the concurrency, ``ordered``, ``return_exceptions``."""
    return given["concurrency"], given["ordered"], given["return_exceptions"]


_LIMITS = ("requests_per_minute", "tokens_per_minute", "limit_store", "limit_key")
"""The batch options that say how a client's batch is paced."""


def _limiter(client: Any, model: str, given: BatchOptions) -> SharedLimit:
    """What paces a client's batch: its limits, kept in the ``limit_store`` given or by the batch alone
    (a ``Pacer`` of its own, made here: a batch's calls run no store's code)."""
    if given["limit_store"] is None and given["limit_key"] is None:
        return Pacer(given["requests_per_minute"], given["tokens_per_minute"])
    return limit_for(
        client.API.name,
        client.base_url,
        model,
        given["requests_per_minute"],
        given["tokens_per_minute"],
        store=given["limit_store"],
        key=given["limit_key"],
    )


def _unpaced(given: BatchOptions) -> BatchOptions:
    """A router's batch options: it paces each route itself, so no limit is taken."""
    taken = [name for name in _LIMITS if given[name] is not None]  # type: ignore[literal-required]
    if taken:
        raise ValueError(
            f"a router paces each route to its own limits (Route's, or the router's limit_store): "
            f"pass no {', '.join(taken)} to its batch"
        )
    return given


Send = Callable[[str, Mapping[str, Any], "HookFactory"], Any]
"""How a batch sends one prompt: its prompt, parameters and the batch's hooks for its call."""


def _calls(client: Any, model: str, options: Options) -> Send:
    """Each prompt a call of ``client`` (``call``: the options split and checked once for the batch)."""

    def send(prompt: str, params: Mapping[str, Any], hooks: HookFactory) -> Any:
        params, merged = options.split(params)  # a job's own options, if it has any
        return client.call(model, prompt, params, merged.merged({"hooks": (hooks,)}))

    return send


def _routed(complete: Callable[..., Any]) -> Send:
    """Each prompt a call of a router's ``complete``, which gives the batch's hooks to each route's call."""

    def send(prompt: str, params: Mapping[str, Any], hooks: HookFactory) -> Any:
        return complete(prompt, **params, hooks=[*params.get("hooks", ()), hooks])

    return send


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

    __slots__ = ("booked", "cache_missed", "sent")

    def __init__(self) -> None:
        self.sent = 0
        self.booked: int | None = None
        self.cache_missed = False


class _Batch:
    """What a batch's prompts share: how one is sent, the hooks of its calls, the tally, the budget, and
    (for a sync batch) the event that ends it."""

    def __init__(
        self,
        send: Send,
        hooks: Callable[[_Batch, _Prompt, CallInfo], CallHooks],
        budget: Budget | None = None,
        *,
        cached: bool,
    ) -> None:
        self.send = send
        self.hooks = hooks
        self.budget = budget
        self.tally = Tally()
        self.stop = threading.Event()
        self.context = contextvars.copy_context()  # the caller's: its current span is each prompt's parent
        self.samples: dict[bytes, int] | None = {} if cached else None

    def numbered(self, job: Job) -> Job:
        """``job``, with a response cache: the n-th identical prompt (same parameters) so far is the cache's
        sample n (``cache_sample``), so that n identical prompts that sample are n samples, the same n on
        a re-run. Numbered in input order, as the jobs are read; each distinct prompt costs a digest."""
        if self.samples is None:
            return job
        index, prompt, params = job
        text = json.dumps(
            [prompt, params, self.target(job)], sort_keys=True, default=repr, ensure_ascii=False
        )
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        sample = self.samples.get(digest, 0)
        self.samples[digest] = sample + 1
        return job if sample == 0 else (index, prompt, {**params, "cache_sample": sample})

    def sender(self, job: Job) -> Send:
        """How ``job`` is sent (a fan-out's: to its target)."""
        return self.send

    def target(self, job: Job) -> int:
        """The number of ``job``'s target (a fan-out's; else 0): samples are numbered per target."""
        return 0

    def complete(self, job: Job, state: _Prompt) -> Any:
        """A job's call (its completion, or an awaitable of it), with the batch's hooks."""
        _, prompt, params = job
        return self.sender(job)(prompt, params, functools.partial(self.hooks, self, state))

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

    A 429 met the batch's own pace, which the limiter lowers for it (and pauses for its Retry-After):
    the attempt loop retries it without spending a retry (at most ``FORGIVEN_429S`` times a call). A
    sync batch's attempt still waiting when the batch ends is not sent, nor a prompt's first when the
    budget says no.
    """

    def __init__(self, batch: _Batch, prompt: _Prompt, call: CallInfo) -> None:
        super().__init__(call)
        self.route = None if call.route is None else batch.tally.route(call.route)
        self.tallies = (batch.tally,) if self.route is None else (batch.tally, self.route)
        self.stop = batch.stop
        self.budget = batch.budget
        self.prompt = prompt
        self.estimate = estimate_tokens(call.prompt, call.params, call.client.API.max_tokens)
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
            self.budget.settle(self.prompt.booked, used_tokens(completion, self.estimate))
            self.prompt.booked = None

    def failed(self, error: APIError) -> bool:
        self._answered()
        if not isinstance(error, RateLimitError):
            return False
        for tally in self.tallies:
            tally.add("rate_limited")
        return True

    def answered(self, completion: Completion | None) -> None:
        for tally in self.tallies:
            tally.add("cache_hits")

    def finished(self, error: BaseException | None) -> None:
        if self.route is not None and isinstance(error, APIError):
            self.route.failure(type(error).__name__)
        options = self.call.options
        if (
            self.prompt.sent
            and options is not None
            and options.cache is not None
            and not self.prompt.cache_missed
        ):
            self.prompt.cache_missed = True  # once a prompt, whatever routes it went to
            for tally in self.tallies:
                tally.add("cache_misses")


class _Paced(_Counted):
    """A sync batch call's hooks: each attempt waits for its turn of the batch's limit (no later than the
    call's deadline), and stops when the batch does; a 429 pauses the pacer as the retry policy would."""

    def __init__(
        self, pacer: SharedLimit, policy: RetryPolicy, batch: _Batch, prompt: _Prompt, call: CallInfo
    ) -> None:
        super().__init__(batch, prompt, call)
        self.pacer = pacer
        self.policy = policy

    def before(self) -> None:
        if wait_turn(self.pacer.turns(self.estimate), self.call.deadline, self.stop.wait):
            raise _Stopped
        super().before()

    def succeeded(self, completion: Completion | None) -> None:
        super().succeeded(completion)
        self.pacer.settle(self.estimate, used_tokens(completion, self.estimate))

    def failed(self, error: APIError) -> bool:
        if isinstance(error, RateLimitError):
            self.pacer.throttled(self.policy.retry_after(error))
        return super().failed(error)


class _APaced(_Counted):
    """An async batch call's hooks: each attempt waits for the ``Limiter`` (a ``Pacer``, or Ray's), no
    later than the call's deadline; a 429 pauses it as the retry policy would."""

    def __init__(
        self, limiter: Limiter, policy: RetryPolicy, batch: _Batch, prompt: _Prompt, call: CallInfo
    ) -> None:
        super().__init__(batch, prompt, call)
        self.limiter = limiter
        self.policy = policy

    async def abefore(self) -> None:
        deadline = self.call.deadline
        if deadline is None:
            await self.limiter.acquire(self.estimate)
        else:  # a turn after it comes too late: the attempt loop ends the call at the deadline
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(deadline - time.monotonic()):
                    await self.limiter.acquire(self.estimate)
        self.before()

    async def asucceeded(self, completion: Completion | None) -> None:
        self.succeeded(completion)
        self.limiter.settle(self.estimate, used_tokens(completion, self.estimate))

    async def afailed(self, error: APIError) -> bool:
        if isinstance(error, RateLimitError):
            self.limiter.throttled(self.policy.retry_after(error))
        return self.failed(error)


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
    """One prompt in a worker thread: its call, paced and counted by the batch's hooks."""
    state = _Prompt()
    error: BaseException | None = None
    try:
        return batch.counted(batch.complete(job, state))
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
    batch: _Batch, jobs: Iterable[Job], concurrency: int, ordered: bool, keep: bool
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
                future = workers.submit(batch.numbered(_checked(job)))
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
    """One prompt as a task: its call, paced and counted by the batch's hooks."""
    state = _Prompt()
    error: BaseException | None = None
    try:
        return batch.counted(await batch.complete(job, state))
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
                task = asyncio.create_task(_acomplete(batch, batch.numbered(_checked(job))))
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
