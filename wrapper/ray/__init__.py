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

Each row's answer comes as the columns of a result line (``wrapper.batch``'s one format, as the
command line writes it): ``error`` is ``{"type", "status", "message"}``, a column named as a keyword
of the API gives that row's value of it, and ``summarize`` adds the rows up as the command line's
summary does.

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

from wrapper import HTTP_LIBRARY_ENV, apis
from wrapper.batch import (
    RESULT_FIELDS,
    BatchResult,
    InputLineError,
    ResultTotals,
    acomplete_jobs,
    error_fields,
)
from wrapper.pacing import Limiter, LimitStore, LocalStore, checked_key, checked_limit, limit_for, limit_store

from ._leases import Coordinator, Grant, LeasedLimiter, Report

if TYPE_CHECKING:
    from wrapper import AsyncClient

__all__ = ["OUTPUT_COLUMNS", "complete_dataset", "summarize"]

OUTPUT_COLUMNS = RESULT_FIELDS
"""The columns ``complete_dataset`` adds to every row: a result line's fields (``wrapper.batch``)."""

_LOGPROB = pa.struct([("token", pa.string()), ("logprob", pa.float64())])
_TYPES = {  # the rest are strings
    "prompt_tokens": pa.int64(),
    "response_tokens": pa.int64(),
    "logprobs": pa.list_(pa.struct([*_LOGPROB, ("top_logprobs", pa.list_(_LOGPROB))])),
    "cached": pa.bool_(),
    "error": pa.struct([("type", pa.string()), ("status", pa.int64()), ("message", pa.string())]),
}

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
    limit_store: LimitStore | str | None = None,
    limit_key: str | None = None,
    client_options: Mapping[str, Any] | None = None,
    on_error: Literal["column", "raise"] = "column",
    **params: Any,
) -> ray.data.Dataset:
    """Complete the prompt in every row of ``dataset``: a lazy Dataset with the answers as new columns.

    Every input column is kept and ``OUTPUT_COLUMNS`` are added, a result line's fields as the command
    line writes them: ``text``, ``finish_reason``, ``prompt_tokens``, ``response_tokens`` (integers),
    ``logprobs``, ``request_id`` (None where the client does not report it), ``route`` (None),
    ``cached`` (whether a response cache gave it) and ``error`` (None, or ``{"type", "status",
    "message"}``); each input row comes out once, in no
    particular order. A column named as a keyword argument of the API (``max_tokens``, ``temperature``,
    ...) gives its row's value of it, over ``params`` (a null leaves the row to them); a row whose
    prompt or values the API refuses gets an ``InputLineError`` and sends nothing. ``workers`` actors
    each keep ``concurrency`` requests in flight;
    ``requests_per_minute``/``tokens_per_minute`` hold for all of them together, paced evenly, and
    429s slow them down together (with or without a limit), as ``complete_many`` does in one process:
    an actor of the job's grants the workers leases of the limits, unless ``limit_store`` (a
    ``redis://`` URL or a ``RedisStore``) keeps them, shared with every other process naming the same
    store and ``limit_key`` (None: the API, base URL host and model): other jobs, services.
    ``client_options`` are the client's constructor arguments (credentials, ``base_url``,
    ``timeout``, ``max_retries``, ``cache``: a ``redis://`` URL shares one response cache among the
    workers); those left out come from the driver's environment. They reach the workers wrapped, so
    Ray never prints them; the workers' clients speak the HTTP library the driver's
    ``COMPLETION_CLIENTS_HTTP`` names (httpx unless it says httpx2). ``on_error="raise"`` fails the
    job on the first failed prompt. ``params`` go to every ``complete`` call (``max_tokens=64``,
    ...). ``summarize`` adds the output up.
    """
    _check(dataset, api, prompt_column, workers, concurrency, on_error)
    rpm = checked_limit("requests_per_minute", requests_per_minute)
    tpm = checked_limit("tokens_per_minute", tokens_per_minute)
    shared = _shared(limit_store, limit_key, rpm, tpm)
    options = _options(apis.get(api), client_options)
    apis.get(api).clients()[0](**options).close()  # bad or missing options fail here, not on a worker
    # Unnamed and not detached: it lives as long as the returned Dataset (whose plan holds the handle).
    coordinator = (
        ray.remote(_LeaseCoordinator).options(num_cpus=0).remote(rpm, tpm, workers)
        if shared is None
        else None
    )
    library = os.environ.get(HTTP_LIBRARY_ENV)  # the workers' clients speak the driver's HTTP library
    remote_args: dict[str, Any] = (
        {"runtime_env": {"env_vars": {HTTP_LIBRARY_ENV: library}}} if library else {}
    )
    return dataset.map_batches(
        _CompletionWorker,
        fn_constructor_kwargs={
            "job": _Job(
                api, model, prompt_column, concurrency, on_error == "raise", params, _keywords(api, dataset)
            ),
            "options": _RedactedOptions(options),
            "coordinator": coordinator,
            "shared": shared,
        },
        batch_size=concurrency * _BATCHES_PER_CONCURRENCY,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=_WORKER_CPUS,
        udf_modifying_row_count=False,
        **remote_args,
    )


def summarize(dataset: ray.data.Dataset) -> dict[str, Any]:
    """What the rows of ``complete_dataset``'s output add up to, as the command line's summary gives a
    results file's (``wrapper.batch.ResultTotals``): ``results``, ``succeeded``, ``failed``, ``failures``
    by error type, ``prompt_tokens`` and ``response_tokens``. It runs the Dataset (``materialize()`` it
    first to use its rows again)."""
    totals = ResultTotals()
    for row in dataset.select_columns(list(OUTPUT_COLUMNS)).iter_rows():
        totals.add(row)
    return totals.as_dict()


def _shared(
    store: object, key: object, rpm: float | None, tpm: float | None
) -> tuple[LimitStore | str, str | None, float | None, float | None] | None:
    """The limits as a store keeps them for the workers (None: the job's actor does), checked."""
    given = limit_store(store)
    named = None if key is None else checked_key(key)
    if given is None:
        if key is not None:
            raise ValueError(f"limit_key names a limit kept in a store: give limit_store too; got {key!r}")
        return None
    if isinstance(given, LocalStore):
        raise ValueError(
            "limit_store must be a Redis URL or a RedisStore for Ray (a LocalStore is one process's, and "
            "each worker is a process); leave it out for the job's own lease actor"
        )
    return given, named, rpm, tpm


def _keywords(api: str, dataset: ray.data.Dataset) -> tuple[str, ...]:
    """The dataset's columns named as keyword arguments of the API: each row's own parameters."""
    schema = dataset.schema()
    names = set(schema.names) if schema is not None else set()
    return tuple(sorted(names & set(apis.get(api).rules())))


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
    """What every worker runs: the API, model, prompt column, per-worker concurrency, parameters, and
    the columns that are each row's own parameters."""

    def __init__(
        self,
        api: str,
        model: str,
        column: str,
        concurrency: int,
        fail_fast: bool,
        params: dict[str, Any],
        keywords: tuple[str, ...] = (),
    ) -> None:
        self.api, self.model, self.column = api, model, column
        self.concurrency, self.fail_fast, self.params, self.keywords = (
            concurrency,
            fail_fast,
            params,
            keywords,
        )

    def row(self, block: dict[str, list[Any]], index: int) -> tuple[str, dict[str, Any]]:
        """Row ``index``'s prompt and parameters (its own over the job's), as the API checks them;
        ``InputLineError`` saying why not."""
        prompt = block[self.column][index]
        if not isinstance(prompt, str):  # a null or a number: no request sent
            raise InputLineError(f"column {self.column!r} holds {type(prompt).__name__}, not a string")
        own = {name: block[name][index] for name in self.keywords if block[name][index] is not None}
        params = {**self.params, **own}
        try:
            apis.get(self.api).check(params, prompt)
        except (TypeError, ValueError) as exc:
            raise InputLineError(str(exc)) from None
        return prompt, params

    def __repr__(self) -> str:
        return f"_Job({self.api}, {self.model!r}, column={self.column!r}, concurrency={self.concurrency})"


class _CompletionWorker:
    """One Ray actor of the pool: an async client on its own event loop, reused for every block."""

    def __init__(
        self,
        job: _Job,
        options: _RedactedOptions,
        coordinator: ray.actor.ActorHandle[_LeaseCoordinator] | None,
        shared: tuple[LimitStore | str, str | None, float | None, float | None] | None = None,
    ) -> None:
        self._job = job
        self._loop = asyncio.new_event_loop()
        self._client: AsyncClient = apis.get(job.api).clients()[1](**options.reveal())
        self._limiter: Limiter
        if shared is not None:  # the limits in a store: this worker's pacer of them
            store, key, rpm, tpm = shared
            client = self._client
            self._limiter = limit_for(job.api, client.base_url, job.model, rpm, tpm, store=store, key=key)
            return
        assert coordinator is not None
        worker = uuid.uuid4().hex

        async def ask(report: Report) -> Grant:
            grant: Grant = await coordinator.grant.remote(worker, report)
            return grant

        self._limiter = LeasedLimiter(ask)

    def __call__(self, block: pa.Table) -> pa.Table:
        return self._loop.run_until_complete(self._complete(block))

    async def _complete(self, block: pa.Table) -> pa.Table:
        rows = block.select([self._job.column, *self._job.keywords]).to_pydict()
        columns: dict[str, list[Any]] = {name: [None] * block.num_rows for name in OUTPUT_COLUMNS}
        jobs = []
        for index in range(block.num_rows):
            try:
                jobs.append((index, *self._job.row(rows, index)))
            except InputLineError as exc:  # that row's error, no request sent
                if self._job.fail_fast:
                    raise
                _fill(columns, index, error_fields(exc))
        results = acomplete_jobs(
            self._client,
            self._job.model,
            iter(jobs),
            concurrency=self._job.concurrency,
            ordered=False,
            return_exceptions=True,
            limiter=self._limiter,
        )
        async for result in results:
            if result.error is not None and self._job.fail_fast:
                await results.aclose()
                raise RuntimeError(f"a prompt failed (on_error='raise'): {_describe(result)}")
            _fill(columns, result.index, result.fields())
        for name, values in columns.items():
            block = block.append_column(name, pa.array(values, type=_TYPES.get(name, pa.string())))
        return block

    def __del__(self) -> None:
        """Close the connection pool when Ray lets the actor go."""
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()


def _fill(columns: dict[str, list[Any]], index: int, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        columns[name][index] = value


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
