"""Completion batches on Ray Data: ``complete_dataset``, with one rate limit shared by the whole cluster.

    import ray.data
    from wrapper.ray import complete_dataset

    ds = ray.data.read_parquet("s3://bucket/prompts/")  # a "prompt" column, plus any others
    out = complete_dataset(ds, "scale", "deployment-id", workers=8, concurrency=32,
                           requests_per_minute=3000, max_tokens=64)
    out.write_parquet("s3://bucket/completions/")

Each worker is a Ray actor holding one async client, built once, that runs the batch machinery
of ``complete_many`` over the blocks it is given. N workers together keep one limit (and slow down
together on 429s) instead of each keeping it alone, N times too hard.

How: one coordinator actor keeps the limit and hands it out in leases. A lease is a worker's
share of the limit (the limit over the workers sending) for a short window, about half a second,
or as long as one request and its tokens take at that share, when longer; the worker spends it
evenly with its own in-process pacer and asks for its next lease when the window or its budget
runs out, reporting what it used, its successes, its token counts and its 429s. What a lease did
not use goes back to the cluster with that call, and a lease nobody renews ends with its window
(while fewer workers than ``workers`` hold leases, as when they start or finish, leases are
shorter, so a worker who comes waits little for its share). So the coordinator is called once a lease, not
once a request, and is no ceiling on the cluster's rate; at a low rate a lease is one request,
and requests are spaced as evenly as in one process.

429s act at once: the worker that meets one pauses for its Retry-After and tells the coordinator
straight away, which pauses every later lease for it, and cuts the cluster's rate when 429s are
too many of the answers (with no limit given too: the cluster then opens slowly and adapts as one
batch does, in leases one step of the opening long while it lasts).
Leases already out are not recalled, so every other worker slows down or pauses with its next
lease, at most half a second later.

Bounds: a limit that holds still is never exceeded by the leases. The requests themselves, like
one process's, may run a quarter of a second of their budget ahead, and one request a lease
ahead, so over any stretch of time the cluster sends at most the limit for that stretch plus
half a second of the limit and two requests per worker. After a 429 or a cut, over-sending is
bounded by one outstanding lease per worker: half a second at the old rate.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

try:
    import pyarrow as pa
    import ray
    import ray.data
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without ray
    from wrapper.extras import install_hint

    raise ImportError(f"wrapper.ray needs Ray Data, which is not installed: {install_hint('ray')}") from exc

from wrapper import apis
from wrapper.batch import BatchResult, acomplete_jobs
from wrapper.pacing import checked_limit

from ._leases import Coordinator, Grant, LeasedLimiter, Report

if TYPE_CHECKING:
    from wrapper import AsyncClient

__all__ = ["OUTPUT_COLUMNS", "complete_dataset"]

OUTPUT_COLUMNS = ("text", "finish_reason", "prompt_tokens", "response_tokens", "request_id", "error")
"""The columns ``complete_dataset`` adds to every row."""

_TYPES = {"prompt_tokens": pa.int64(), "response_tokens": pa.int64()}  # the rest are strings

_WORKER_CPUS = 0.25  # workers wait on the network: let several share a core, and leave room for reads
_BATCHES_PER_CONCURRENCY = 8  # rows per block handed to a worker, per request it keeps in flight


def complete_dataset(
    dataset: ray.data.Dataset,
    api: str,
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
    ``requests_per_minute``/``tokens_per_minute`` hold for all of them together, paced evenly, and
    429s slow them down together (with or without a limit), as ``complete_many`` does in one process.
    ``client_options`` are the client's constructor arguments (credentials, ``base_url``,
    ``timeout``, ``max_retries``, ``cache``: a ``redis://`` URL shares one response cache among the
    workers); those left out come from the driver's environment. They reach
    the workers wrapped, so Ray never prints them. ``on_error="raise"`` fails the job on the first
    failed prompt. ``params`` go to every ``complete`` call (``max_tokens=64``, ...).
    """
    _check(dataset, api, prompt_column, workers, concurrency, on_error)
    rpm = checked_limit("requests_per_minute", requests_per_minute)
    tpm = checked_limit("tokens_per_minute", tokens_per_minute)
    options = _options(apis.get(api), client_options)
    apis.get(api).clients()[0](**options).close()  # bad or missing options fail here, not on a worker
    # Unnamed and not detached: it lives as long as the returned Dataset (whose plan holds the handle).
    coordinator = ray.remote(_LeaseCoordinator).options(num_cpus=0).remote(rpm, tpm, workers)
    return dataset.map_batches(
        _CompletionWorker,
        fn_constructor_kwargs={
            "job": _Job(api, model, prompt_column, concurrency, on_error == "raise", params),
            "options": _RedactedOptions(options),
            "coordinator": coordinator,
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
    apis.get(api)  # ValueError naming the APIs for any other name
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


def _options(api: apis.Api, client_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client's constructor arguments: those given, over those the driver's environment sets."""
    if client_options is not None and not isinstance(client_options, Mapping):
        raise TypeError(f"client_options must be a mapping, got {type(client_options).__name__}")
    options: dict[str, Any] = api.arguments_from(os.environ)
    options.update(client_options or {})
    if "http_client" in options:
        raise ValueError("client_options cannot hold http_client: each worker builds its own connection pool")
    return options


class _RedactedOptions:
    """A client's constructor arguments on their way to the workers: ``repr`` never shows them."""

    __slots__ = ("_options",)

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)

    def reveal(self) -> dict[str, Any]:
        """The arguments themselves, for building the client."""
        return dict(self._options)

    def __repr__(self) -> str:
        return f"_RedactedOptions({', '.join(sorted(self._options))}: <redacted>)"

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
        self, job: _Job, options: _RedactedOptions, coordinator: ray.actor.ActorHandle[_LeaseCoordinator]
    ) -> None:
        self._job = job
        self._loop = asyncio.new_event_loop()
        self._client: AsyncClient = apis.get(job.api).clients()[1](**options.reveal())
        worker = uuid.uuid4().hex

        async def ask(report: Report) -> Grant:
            grant: Grant = await coordinator.grant.remote(worker, report)
            return grant

        self._limiter = LeasedLimiter(ask)

    def __call__(self, block: pa.Table) -> pa.Table:
        return self._loop.run_until_complete(self._complete(block))

    async def _complete(self, block: pa.Table) -> pa.Table:
        prompts = block.column(self._job.column).to_pylist()
        columns: dict[str, list[Any]] = {name: [None] * len(prompts) for name in OUTPUT_COLUMNS}
        for index, prompt in enumerate(prompts):
            if not isinstance(prompt, str):  # a null or a number: that row's error, no request sent
                message = f"column {self._job.column!r} holds {type(prompt).__name__}, not a string"
                if self._job.fail_fast:
                    raise TypeError(message)
                columns["error"][index] = f"TypeError: {message}"
        jobs = ((i, p, self._job.params) for i, p in enumerate(prompts) if isinstance(p, str))
        results = acomplete_jobs(
            self._client,
            self._job.model,
            jobs,
            concurrency=self._job.concurrency,
            ordered=False,
            return_exceptions=True,
            limiter=self._limiter,
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
        """Close the connection pool when Ray lets the actor go."""
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()


def _fill(columns: dict[str, list[Any]], result: BatchResult) -> None:
    i, completion = result.index, result.completion
    columns["request_id"][i] = result.request_id  # None until the client reports one
    if completion is None:
        columns["error"][i] = _describe(result)
        return
    columns["text"][i] = completion.text
    columns["finish_reason"][i] = completion.finish_reason
    columns["prompt_tokens"][i] = completion.prompt_tokens
    columns["response_tokens"][i] = completion.response_tokens


def _describe(result: BatchResult) -> str:
    return f"{type(result.error).__name__}: {result.error}"


class _LeaseCoordinator:
    """The cluster's one limit, in an actor: it grants the workers their leases of it."""

    def __init__(
        self, requests_per_minute: float | None, tokens_per_minute: float | None, workers: int
    ) -> None:
        self._coordinator = Coordinator(requests_per_minute, tokens_per_minute, workers=workers)

    def grant(self, worker: str, report: Report) -> Grant:
        return self._coordinator.grant(worker, report)
