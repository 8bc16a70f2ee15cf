"""Completion batches on Ray Data: ``complete_dataset``, with one rate limit shared by the whole cluster.

    import ray.data
    from wrapper.ray import complete_dataset

    ds = ray.data.read_parquet("s3://bucket/prompts/")  # a "prompt" column, plus any others
    out = complete_dataset(ds, "scale", "deployment-id", workers=8, concurrency=32,
                           requests_per_minute=3000, max_tokens=64)
    out.write_parquet("s3://bucket/completions/")

Each worker is a Ray actor holding one async client, built once, that runs the batch machinery
of ``complete_many`` over the blocks it is given. When a limit is set, one limiter actor paces
every worker's requests, so N workers together keep the limit instead of N times it.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

try:
    import pyarrow as pa
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without ray
    raise ImportError(
        "wrapper.ray needs Ray Data, which is not installed: pip install 'completion-clients[ray]'"
    ) from exc

from ._batch import BatchResult, Completer, acomplete_jobs
from .errors import RateLimitError

if TYPE_CHECKING:
    from ._base import AsyncClient
    from ._results import Completion

__all__ = ["OUTPUT_COLUMNS", "complete_dataset"]

OUTPUT_COLUMNS = ("text", "finish_reason", "prompt_tokens", "response_tokens", "request_id", "error")
"""The columns ``complete_dataset`` adds to every row."""

_TYPES = {"prompt_tokens": pa.int64(), "response_tokens": pa.int64()}  # the rest are strings

# Each API's constructor arguments and the environment variables they default to: read in the
# driver, so that workers on other machines need no environment of their own.
_ENVIRONMENT = {
    "scale": {"api_key": "SGP_API_KEY", "account_id": "SGP_ACCOUNT_ID", "base_url": "SGP_CLIENT_BASE_URL"},
    "gradient": {
        "access_token": "GRADIENT_ACCESS_TOKEN",
        "workspace_id": "GRADIENT_WORKSPACE_ID",
        "base_url": "GRADIENT_API_URL",
    },
}
_MAX_TOKENS = {"scale": "max_tokens", "gradient": "max_generated_token_count"}
_WORKER_CPUS = 0.25  # workers wait on the network: let several share a core, and leave room for reads
_BATCHES_PER_CONCURRENCY = 8  # rows per block handed to a worker, per request it keeps in flight


def complete_dataset(
    dataset: ray.data.Dataset,
    api: Literal["scale", "gradient"],
    model: str,
    *,
    prompt_column: str = "prompt",
    workers: int = 2,
    concurrency: int = 16,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    client_options: Mapping[str, Any] | None = None,
    on_error: Literal["column", "raise"] = "column",
    **params: Any,
) -> ray.data.Dataset:
    """Complete the prompt in every row of ``dataset``: a lazy Dataset with the answers as new columns.

    Every input column is kept and ``OUTPUT_COLUMNS`` are added: ``text``, ``finish_reason``,
    ``prompt_tokens``, ``response_tokens``, ``request_id`` (None where the client does not report
    it) and ``error`` (None, or ``"ErrorClass: message"``); each input row comes out once, in no
    particular order. ``workers`` actors each keep ``concurrency`` requests in flight;
    ``requests_per_minute``/``tokens_per_minute`` hold for all of them together, paced evenly.
    ``client_options`` are the client's constructor arguments (credentials, ``base_url``,
    ``timeout``, ``max_retries``); those left out come from the driver's environment. They reach
    the workers wrapped, so Ray never prints them. ``on_error="raise"`` fails the job on the first
    failed prompt. ``params`` go to every ``complete`` call (``max_tokens=64``, ...).
    """
    _check(dataset, api, prompt_column, workers, concurrency, on_error)
    limits = {
        "requests_per_minute": _limit("requests_per_minute", requests_per_minute),
        "tokens_per_minute": _limit("tokens_per_minute", tokens_per_minute),
    }
    options = _options(api, client_options)
    _client_class(api, sync=True)(**options).close()  # bad or missing options fail here, not on a worker
    limiter = None
    if limits["requests_per_minute"] is not None or limits["tokens_per_minute"] is not None:
        actor = ray.remote(_LimiterActor).options(
            num_cpus=0, max_concurrency=max(1000, 2 * workers * concurrency)
        )
        limiter = actor.remote(**limits)
    return dataset.map_batches(
        _CompletionWorker,
        fn_constructor_kwargs={
            "job": _Job(api, model, prompt_column, concurrency, on_error == "raise", params),
            "options": RedactedOptions(options),
            "limiter": limiter,
        },
        batch_size=concurrency * _BATCHES_PER_CONCURRENCY,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=_WORKER_CPUS,
        udf_modifying_row_count=False,
    )


def _check(
    dataset: object,
    api: object,
    prompt_column: object,
    workers: object,
    concurrency: object,
    on_error: object,
) -> None:
    if not isinstance(dataset, ray.data.Dataset):
        raise TypeError(f"dataset must be a ray.data.Dataset, got {type(dataset).__name__}")
    if api not in _ENVIRONMENT:
        raise ValueError(f"api must be 'scale' or 'gradient', got {api!r}")
    if on_error not in ("column", "raise"):
        raise ValueError(f"on_error must be 'column' or 'raise', got {on_error!r}")
    for name, value in (("workers", workers), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    schema = dataset.schema()
    names = list(schema.names) if schema is not None else []
    if prompt_column not in names:
        raise ValueError(f"prompt_column {prompt_column!r} is not a column of the dataset (columns: {names})")
    taken = sorted(set(OUTPUT_COLUMNS) & set(names))
    if taken:
        raise ValueError(f"the dataset already has column(s) {taken}, which complete_dataset adds")


def _limit(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive number or None, got {value!r}")
    return float(value)


def _options(api: str, client_options: Mapping[str, Any] | None) -> dict[str, Any]:
    if client_options is not None and not isinstance(client_options, Mapping):
        raise TypeError(f"client_options must be a mapping, got {type(client_options).__name__}")
    options = {arg: os.environ[env] for arg, env in _ENVIRONMENT[api].items() if os.environ.get(env)}
    options.update(client_options or {})
    if "http_client" in options:
        raise ValueError("client_options cannot hold http_client: each worker builds its own connection pool")
    return options


def _client_class(api: str, *, sync: bool) -> type[Any]:
    if api == "scale":
        from .scale import AsyncScale, Scale

        return Scale if sync else AsyncScale
    from .gradient import AsyncGradient, Gradient

    return Gradient if sync else AsyncGradient


class RedactedOptions:
    """A client's constructor arguments on their way to the workers: ``repr`` never shows them."""

    __slots__ = ("_options",)

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)

    def reveal(self) -> dict[str, Any]:
        """The arguments themselves, for building the client."""
        return dict(self._options)

    def __repr__(self) -> str:
        return f"RedactedOptions({', '.join(sorted(self._options))}: <redacted>)"

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:
        return self._options

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._options = state


class _Job:
    """What every worker runs: the API, model, prompt column, per-worker concurrency and parameters."""

    def __init__(
        self, api: str, model: str, column: str, concurrency: int, fail_fast: bool, params: dict[str, Any]
    ) -> None:
        self.api, self.model, self.column = api, model, column
        self.concurrency, self.fail_fast, self.params = concurrency, fail_fast, params

    def __repr__(self) -> str:
        return f"_Job({self.api}, {self.model!r}, column={self.column!r}, concurrency={self.concurrency})"


class _CompletionWorker:
    """One Ray actor of the pool: an async client on its own event loop, reused for every block."""

    def __init__(
        self, job: _Job, options: RedactedOptions, limiter: ray.actor.ActorHandle[_LimiterActor] | None
    ) -> None:
        self._job = job
        self._loop = asyncio.new_event_loop()
        self._client: AsyncClient = _client_class(job.api, sync=False)(**options.reveal())
        self._completer: Completer = self._client
        if limiter is not None:
            estimate = _estimator(job.params.get(_MAX_TOKENS[job.api]))
            self._completer = _Paced(self._client, _RemoteLimiter(limiter), estimate)

    def __call__(self, block: pa.Table) -> pa.Table:
        return self._loop.run_until_complete(self._complete(block))

    async def _complete(self, block: pa.Table) -> pa.Table:
        prompts = block.column(self._job.column).to_pylist()
        columns: dict[str, list[Any]] = {name: [None] * len(prompts) for name in OUTPUT_COLUMNS}
        for index, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                error = f"TypeError: column {self._job.column!r} holds {type(prompt).__name__}, not a string"
                if self._job.fail_fast:
                    raise TypeError(error.partition(": ")[2])
                columns["error"][index] = error
        jobs = ((i, p, self._job.params) for i, p in enumerate(prompts) if isinstance(p, str))
        results = acomplete_jobs(
            self._completer,
            self._job.model,
            jobs,
            concurrency=self._job.concurrency,
            ordered=False,
            return_exceptions=True,
        )
        async for result in results:
            if result.error is not None and self._job.fail_fast:
                await results.aclose()
                raise RuntimeError(f"a prompt failed (on_error='raise'): {_describe(result)}")
            _fill(columns, result)
        for name, values in columns.items():
            block = block.append_column(name, pa.array(values, type=_TYPES.get(name, pa.string())))
        return block

    def __del__(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()


def _fill(columns: dict[str, list[Any]], result: BatchResult) -> None:
    i, completion = result.index, result.completion
    columns["request_id"][i] = _request_id(result)
    if completion is None:
        columns["error"][i] = _describe(result)
        return
    columns["text"][i] = completion.text
    columns["finish_reason"][i] = completion.finish_reason
    columns["prompt_tokens"][i] = completion.prompt_tokens
    columns["response_tokens"][i] = completion.response_tokens


def _describe(result: BatchResult) -> str:
    return f"{type(result.error).__name__}: {result.error}"


def _request_id(result: BatchResult) -> str | None:
    """The request id the server gave, where the client reports it (a completion's or an error's)."""
    source: object = result.completion if result.completion is not None else result.error
    request_id = getattr(source, "request_id", None)
    return request_id if isinstance(request_id, str) else None


# --- The limiter seam --------------------------------------------------------------------------
# Contract: a limiter has ``async acquire(cost)``, ``async settle(estimate, actual)`` and
# ``async throttled(retry_after)``. ``_RemoteLimiter`` is that interface over the cluster's one
# ``_LimiterActor``; ``_Paced`` plugs any such limiter into the batch by wrapping the client, and
# ``_Pacer`` is the pacing algorithm the actor runs. Once the batch machinery takes ``limiter=``
# and ships its in-process pacer, ``_Paced`` becomes ``acomplete_jobs(..., limiter=...)`` and
# ``_Pacer`` that pacer class: nothing else here changes.


class _Pacer:
    """Even pacing to requests and tokens per minute: buckets holding one second's budget, refilled smoothly.

    A request waits its turn (first come, first served) until both buckets hold its cost (at most a
    full bucket, so a request bigger than a second's tokens still goes, then leaves a debt). After
    a 429 nobody goes until its Retry-After (1 s if none) has passed, and the buckets start empty.
    """

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None) -> None:
        self._requests = _Bucket(requests_per_minute) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute) if tokens_per_minute else None
        self._turn = asyncio.Lock()
        self._paused_until = 0.0

    async def acquire(self, cost: float) -> None:
        async with self._turn:
            # A deadline that a 429 (``throttled``) may push further: sleep until it, then look again.
            while (wait := self._wait(cost)) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait)
            if self._requests is not None:
                self._requests.take(1.0)
            if self._tokens is not None:
                self._tokens.take(cost)

    def _wait(self, cost: float) -> float:
        now = asyncio.get_running_loop().time()
        waits = [self._paused_until - now]
        if self._requests is not None:
            waits.append(self._requests.wait(1.0, now))
        if self._tokens is not None:
            waits.append(self._tokens.wait(cost, now))
        return max(waits)

    async def settle(self, estimate: float, actual: float) -> None:
        if self._tokens is not None:
            self._tokens.take(actual - estimate)

    async def throttled(self, retry_after: float | None) -> None:
        now = asyncio.get_running_loop().time()
        self._paused_until = max(self._paused_until, now + (retry_after if retry_after is not None else 1.0))
        for bucket in (self._requests, self._tokens):
            if bucket is not None:
                bucket.empty(now)


class _Bucket:
    """``per_minute`` units, refilled continuously, holding at most one second's worth (at least one unit)."""

    def __init__(self, per_minute: float) -> None:
        self._rate = per_minute / 60.0
        self._capacity = max(self._rate, 1.0)
        self._level = self._capacity
        self._stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is not None:
            self._level = min(self._capacity, self._level + (now - self._stamp) * self._rate)
        self._stamp = now

    def wait(self, cost: float, now: float) -> float:
        self._refill(now)
        return (min(cost, self._capacity) - self._level) / self._rate

    def take(self, cost: float) -> None:
        self._level = min(self._capacity, self._level - cost)

    def empty(self, now: float) -> None:
        self._refill(now)
        self._level = min(self._level, 0.0)


class _LimiterActor:
    """The cluster's one rate limit: every worker's requests take their turn here."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None) -> None:
        self._pacer = _Pacer(requests_per_minute, tokens_per_minute)

    async def acquire(self, cost: float) -> None:
        await self._pacer.acquire(cost)

    async def settle(self, estimate: float, actual: float) -> None:
        await self._pacer.settle(estimate, actual)

    async def throttled(self, retry_after: float | None) -> None:
        await self._pacer.throttled(retry_after)


class _RemoteLimiter:
    """The limiter interface, answered by the cluster's ``_LimiterActor``."""

    def __init__(self, actor: ray.actor.ActorHandle[_LimiterActor]) -> None:
        self._actor = actor

    async def acquire(self, cost: float) -> None:
        await self._actor.acquire.remote(cost)

    async def settle(self, estimate: float, actual: float) -> None:
        await self._actor.settle.remote(estimate, actual)

    async def throttled(self, retry_after: float | None) -> None:
        await self._actor.throttled.remote(retry_after)


def _estimator(max_tokens: object) -> Callable[[str], int]:
    """A request's token cost before it is sent: ``ceil(len(prompt) / 4)`` plus the max-tokens parameter."""
    extra = max_tokens if isinstance(max_tokens, int) else 0
    return lambda prompt: math.ceil(len(prompt) / 4) + extra


class _Paced:
    """A client whose every attempt first takes its turn from ``limiter``: the batch's client."""

    def __init__(self, client: Any, limiter: _RemoteLimiter, estimate: Callable[[str], int]) -> None:
        self._client, self._limiter, self._estimate = client, limiter, estimate

    @property
    def max_retries(self) -> int:
        return int(self._client.max_retries)

    def with_options(self, *, max_retries: int) -> _Paced:
        return _Paced(self._client.with_options(max_retries=max_retries), self._limiter, self._estimate)

    async def complete(self, model: str, prompt: str, **params: Any) -> Completion:
        cost = float(self._estimate(prompt))
        await self._limiter.acquire(cost)
        try:
            completion: Completion = await self._client.complete(model, prompt, **params)
        except RateLimitError as exc:
            await self._limiter.throttled(exc.retry_after)
            raise
        if completion.prompt_tokens is not None and completion.response_tokens is not None:
            await self._limiter.settle(cost, completion.prompt_tokens + completion.response_tokens)
        return completion
