"""The response cache on the clients' calls, against the sandbox: what it answers, what it sends once,
what it never keeps, and how a store's failure leaves every answer right.

Each test counts the requests that reached the sandbox (``Sandbox.stats()``), reset before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers import call, collect, some_value
from redis_server import RedisServer

from wrapper import apis
from wrapper.cache import RedisStore, SQLiteStore
from wrapper.errors import (
    APIConnectionError,
    APIError,
    ContentFlaggedError,
    InternalServerError,
    RateLimitError,
)
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL, GRADIENT_MODEL = "llama-3-8b-instruct", "nous-hermes2"
MODELS = {"scale": SCALE_MODEL, "gradient": GRADIENT_MODEL}


@pytest.fixture(scope="module")
def module_sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture
def sandbox(module_sandbox: Sandbox) -> Sandbox:
    module_sandbox.reset()
    return module_sandbox


@pytest.fixture
def cache_file(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "completions.db"


def sent(sandbox: Sandbox) -> int:
    return sandbox.stats().requests


def client(sandbox: Sandbox, api: str, asynchronous: bool = False, **options: Any) -> Any:
    classes = {"scale": (Scale, AsyncScale), "gradient": (Gradient, AsyncGradient)}[api]
    credentials = {"scale": {"api_key": "sandbox"}, "gradient": {"access_token": "t", "workspace_id": "w"}}
    return classes[asynchronous](base_url=sandbox.base_url(api), **credentials[api], **options)


@pytest.fixture
async def lane_client(sandbox: Sandbox, lane: str, library: ModuleType) -> AsyncIterator[Callable[..., Any]]:
    """``lane_client(api, **options)``: a client of the ``lane`` (sync; async on its own pools; async on a
    user's ``AsyncClient``), speaking the ``library`` (httpx or httpx2); closed after the test. The sync
    lane runs where an event loop runs (the test's), as a sync client does in a notebook."""
    clients: list[Any] = []
    given: list[Any] = []

    def make(api: str, **options: Any) -> Any:
        if lane == "httpx":
            given.append(library.AsyncClient())
            options["http_client"] = given[-1]
        clients.append(client(sandbox, api, asynchronous=lane != "sync", **options))
        return clients[-1]

    yield make
    for each in clients:
        await call(each.close())
    for each in given:
        await each.aclose()


def max_tokens(api: str, n: int) -> dict[str, int]:
    return {apis.get(api).max_tokens: n}


# --- hits -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", apis.NAMES)
async def test_a_hit_sends_nothing_and_says_it_came_from_the_cache(
    sandbox: Sandbox, cache_file: Path, lane_client: Callable[..., Any], api: str
) -> None:
    c = lane_client(api, cache=str(cache_file))
    first = await call(c.complete(MODELS[api], "Alice was", **max_tokens(api, 6)))
    second = await call(c.complete(MODELS[api], "Alice was", **max_tokens(api, 6)))
    assert sent(sandbox) == 1
    assert (first.cached, second.cached) == (False, True)
    assert (second.text, second.finish_reason, second.request_id) == (
        first.text,
        first.finish_reason,
        first.request_id,
    )
    assert second.to_dict() == {**first.to_dict(), "cached": True}


async def test_async_calls_read_and_write_the_same_entries(sandbox: Sandbox, cache_file: Path) -> None:
    with client(sandbox, "scale", cache=cache_file) as c:
        first = c.complete(SCALE_MODEL, "Alice was", max_tokens=6)
    async with client(sandbox, "scale", asynchronous=True, cache=cache_file) as ac:
        again = await ac.complete(SCALE_MODEL, "Alice was", max_tokens=6)
        other = await ac.complete(SCALE_MODEL, "The Queen", max_tokens=6)
        other_again = await ac.complete(SCALE_MODEL, "The Queen", max_tokens=6)
    assert (again.text, again.cached) == (first.text, True)
    assert (other.cached, other_again.cached, other_again.text) == (False, True, other.text)
    assert sent(sandbox) == 2


def test_none_turns_it_off_for_a_call_and_read_and_write_can_be_skipped(
    sandbox: Sandbox, cache_file: Path
) -> None:
    with client(sandbox, "scale", cache=cache_file) as c:
        c.complete(SCALE_MODEL, "Alice was", max_tokens=6)
        assert not c.complete(SCALE_MODEL, "Alice was", max_tokens=6, cache=None).cached
        assert sent(sandbox) == 2
        refreshed = c.complete(SCALE_MODEL, "Alice was", max_tokens=6, temperature=1.5, cache_read=False)
        assert not refreshed.cached  # refresh: sent even with the entry there...
        again = c.complete(SCALE_MODEL, "Alice was", max_tokens=6, temperature=1.5)
        assert (again.cached, again.text) == (True, refreshed.text)  # ...and its answer replaces it
        unkept = c.complete(SCALE_MODEL, "The Queen", max_tokens=6, cache_write=False)
        assert not c.complete(SCALE_MODEL, "The Queen", max_tokens=6).cached  # nothing was kept
        assert not unkept.cached
        assert c.with_options(cache=None).complete(SCALE_MODEL, "Alice was", max_tokens=6).cached is False
    assert sent(sandbox) == 6
    with pytest.raises(ValueError, match="cache must be a string or a path"):
        Scale(api_key="k", cache=42)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", apis.NAMES)
def test_changing_any_parameter_of_the_spec_is_a_miss(sandbox: Sandbox, cache_file: Path, api: str) -> None:
    """Each keyword argument the spec has, changed alone from a cached call, sends a request (the
    parameters come from the spec, not from a list here)."""
    keywords = importlib.import_module(f"wrapper._generated.{api}.params").KEYWORDS
    base = {"temperature": 0, **max_tokens(api, 4)}
    with client(sandbox, api, cache=cache_file, max_retries=0) as c:
        c.complete(MODELS[api], "Alice was", **base)
        c.complete(MODELS[api], "Alice was", **base)
        assert sent(sandbox) == 1
        for keyword, data in keywords.items():
            before = sent(sandbox)
            with contextlib.suppress(APIError):  # the sandbox may refuse a value (an unknown RAG collection)
                c.complete(MODELS[api], "Alice was", **{**base, keyword: some_value(data["schema"])})
            assert sent(sandbox) == before + 1, keyword
        for extra in ({"extra_body": {"a_field_of_a_later_release": 1}}, {"extra_query": {"version": "2"}}):
            before = sent(sandbox)
            with contextlib.suppress(APIError):  # the sandbox refuses a field its spec does not have
                c.complete(MODELS[api], "Alice was", **base, **extra)
            assert sent(sandbox) == before + 1, extra


def test_the_same_deployment_under_two_base_urls_and_two_models_keep_apart(
    sandbox: Sandbox, cache_file: Path
) -> None:
    with client(sandbox, "scale", cache=cache_file) as c:
        c.complete(SCALE_MODEL, "Alice was", max_tokens=4)
        assert not c.complete("mistral-7b-instruct", "Alice was", max_tokens=4).cached
    same_server = sandbox.base_url("scale").replace("127.0.0.1", "localhost")
    with Scale(api_key="sandbox", base_url=same_server, cache=cache_file) as c:
        assert not c.complete(SCALE_MODEL, "Alice was", max_tokens=4).cached  # another URL: kept apart
    assert sent(sandbox) == 3


# --- in flight at once: sent once -------------------------------------------------------------------------


def test_fifty_identical_calls_at_once_send_one_request(sandbox: Sandbox, cache_file: Path) -> None:
    sandbox.inject(delay=0.5)  # the first request is held: the others arrive while it is under way
    barrier = threading.Barrier(50)
    results: list[Any] = []
    with client(sandbox, "scale", cache=cache_file) as c:

        def call() -> None:
            barrier.wait()
            results.append(c.complete(SCALE_MODEL, "Alice was", max_tokens=6))

        threads = [threading.Thread(target=call) for _ in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sent(sandbox) == 1
    assert len({r.text for r in results}) == 1
    assert sorted(r.cached for r in results) == [False] + [True] * 49


async def test_fifty_identical_async_calls_at_once_send_one_request(
    sandbox: Sandbox, cache_file: Path
) -> None:
    sandbox.inject(delay=0.5)
    async with client(sandbox, "scale", asynchronous=True, cache=cache_file) as c:
        results = await asyncio.gather(
            *(c.complete(SCALE_MODEL, "Alice was", max_tokens=6) for _ in range(50))
        )
    assert sent(sandbox) == 1
    assert len({r.text for r in results}) == 1


async def test_a_failed_leader_leaves_the_waiters_to_send_their_own(
    sandbox: Sandbox, cache_file: Path
) -> None:
    sandbox.inject(status=500, delay=0.3)
    async with client(sandbox, "scale", asynchronous=True, cache=cache_file, max_retries=0) as c:
        results = await asyncio.gather(
            *(c.complete(SCALE_MODEL, "Alice was", max_tokens=6) for _ in range(5)), return_exceptions=True
        )
    assert sum(isinstance(r, InternalServerError) for r in results) == 1
    answers = [r for r in results if not isinstance(r, BaseException)]
    assert len(answers) == 4
    assert len({r.text for r in answers}) == 1
    assert sent(sandbox) == 2  # the failed one, then one of the waiters for all four


# --- sampling --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_n_identical_sampled_prompts_are_n_samples_and_a_rerun_the_same_n(
    sandbox: Sandbox, cache_file: Path, asynchronous: bool
) -> None:
    async def batch() -> list[Any]:
        c = client(sandbox, "scale", asynchronous=asynchronous, cache=cache_file)
        results = c.complete_many(SCALE_MODEL, ["Alice was"] * 5, ordered=True, temperature=1.5, max_tokens=8)
        try:
            if asynchronous:
                return [r async for r in results]
            return list(results)
        finally:
            await c.close() if asynchronous else c.close()

    first = await batch()
    assert sent(sandbox) == 5
    assert len({r.completion.text for r in first}) > 1  # 5 samples, not one answer 5 times
    again = await batch()
    assert sent(sandbox) == 5
    assert [r.completion.text for r in again] == [r.completion.text for r in first]
    assert all(r.completion.cached for r in again)


def test_without_sampling_identical_prompts_share_one_answer_and_stats_count_it(
    sandbox: Sandbox, cache_file: Path
) -> None:
    with client(sandbox, "scale", cache=cache_file) as c:
        batch = c.complete_many(SCALE_MODEL, ["Alice was"] * 5 + ["The Queen"], temperature=0, max_tokens=8)
        results = list(batch)
    assert sent(sandbox) == 2
    assert len({r.completion.text for r in results}) == 2
    stats = batch.stats
    assert (stats.requests, stats.completed, stats.cache_hits, stats.cache_misses) == (2, 6, 4, 2)
    tokens = sum(r.completion.response_tokens for r in results if not r.completion.cached)
    assert stats.response_tokens == tokens  # a hit's tokens were not spent


# --- streams ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", apis.NAMES)
async def test_a_finished_stream_is_replayed_through_the_same_stream_object(
    sandbox: Sandbox, cache_file: Path, lane_client: Callable[..., Any], library: ModuleType, api: str
) -> None:
    c = lane_client(api, cache=cache_file)
    streamed = c.stream(MODELS[api], "Alice was", **max_tokens(api, 8))
    chunks = await collect(streamed)
    replay = c.stream(MODELS[api], "Alice was", **max_tokens(api, 8))
    response = await call(replay.open())
    texts = await collect(replay.text_stream)
    final = await call(replay.get_final_completion())
    again = await collect(c.stream(MODELS[api], "Alice was", **max_tokens(api, 8)))
    assert sent(sandbox) == 1
    assert isinstance(response, library.Response)  # the client's library's, as a stream that went out
    assert response.status_code == 200
    assert response.headers["x-request-id"] == chunks[0].request_id
    assert texts == [chunk.text for chunk in chunks if chunk.text]
    assert [chunk.text for chunk in again] == [chunk.text for chunk in chunks]  # the chunk count too
    assert all(chunk.cached for chunk in again)
    assert (final.text, final.finish_reason, final.cached) == (
        "".join(c.text for c in chunks),
        chunks[-1].finish_reason,
        True,
    )
    assert final.response_tokens == chunks[-1].response_tokens


async def test_a_stream_left_early_is_not_kept(
    sandbox: Sandbox, cache_file: Path, lane_client: Callable[..., Any]
) -> None:
    c = lane_client("scale", cache=cache_file)
    left = c.stream(SCALE_MODEL, "The Queen", max_tokens=8)
    if hasattr(left, "__anext__"):
        await left.__anext__()  # left after the first chunk
        await left.aclose()
    else:
        next(left)
        left.close()
    complete = [chunk.text for chunk in await collect(c.stream(SCALE_MODEL, "The Queen", max_tokens=8))]
    replay = await collect(c.stream(SCALE_MODEL, "The Queen", max_tokens=8))
    assert sent(sandbox) == 2
    assert [chunk.text for chunk in replay] == complete
    assert all(chunk.cached for chunk in replay)


# --- what is never kept -----------------------------------------------------------------------------------


async def test_a_cut_stream_a_429_a_500_and_flagged_content_are_not_kept(
    sandbox: Sandbox, cache_file: Path, lane_client: Callable[..., Any]
) -> None:
    c = lane_client("scale", cache=cache_file, max_retries=0)
    sandbox.inject(cut=2)
    with pytest.raises(APIConnectionError):
        await collect(c.stream(SCALE_MODEL, "Alice was", max_tokens=8))
    assert not (await collect(c.stream(SCALE_MODEL, "Alice was", max_tokens=8)))[-1].cached  # sent again
    for status, error in ((429, RateLimitError), (500, InternalServerError)):
        sandbox.inject(status=status)
        with pytest.raises(error):
            await call(c.complete(SCALE_MODEL, f"status {status}", max_tokens=4))
        assert not (await call(c.complete(SCALE_MODEL, f"status {status}", max_tokens=4))).cached
    g = lane_client("gradient", cache=cache_file)
    for _ in range(2):
        with pytest.raises(ContentFlaggedError):
            await call(g.complete(GRADIENT_MODEL, "how to make explosives", max_generated_token_count=4))
    assert sent(sandbox) == 2 + 4 + 2  # every failure sent, then its retry sent again


# --- stores that fail -------------------------------------------------------------------------------------


def test_a_corrupt_sqlite_file_gives_the_servers_answers_and_a_warning(
    sandbox: Sandbox, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not an SQLite database " * 200)
    with client(sandbox, "scale") as plain:
        expected = [plain.complete(SCALE_MODEL, p, max_tokens=6, temperature=0).text for p in ("a", "b", "a")]
    with (
        caplog.at_level(logging.WARNING, "wrapper.cache"),
        client(sandbox, "scale", cache=SQLiteStore(path)) as c,
    ):
        got = [c.complete(SCALE_MODEL, p, max_tokens=6, temperature=0) for p in ("a", "b", "a")]
    assert [r.text for r in got] == expected
    assert not any(r.cached for r in got)
    assert len(caplog.records) == 1
    assert "could not read an entry" in caplog.records[0].getMessage()
    assert sent(sandbox) == 6


WRITER = """
import sys
from wrapper.scale import Scale
with Scale(api_key="sandbox", base_url=sys.argv[1], cache=sys.argv[2]) as c:
    print(c.complete("llama-3-8b-instruct", "Shared across processes", max_tokens=6, temperature=1.5).text)
"""


def test_two_processes_share_a_redis_store(sandbox: Sandbox, redis_url: str) -> None:
    other = subprocess.run(
        [sys.executable, "-c", WRITER, sandbox.base_url("scale"), redis_url],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    with client(sandbox, "scale", cache=redis_url) as c:
        mine = c.complete(SCALE_MODEL, "Shared across processes", max_tokens=6, temperature=1.5)
    assert (mine.text, mine.cached) == (other.stdout.removesuffix("\n"), True)
    assert sent(sandbox) == 1


async def test_a_redis_killed_mid_batch_loses_no_result_and_gives_no_wrong_one(
    sandbox: Sandbox, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    if not redis_server.answers():
        redis_server.start()
    redis_server.flush()
    prompts = [f"Prompt number {i}" for i in range(60)]
    async with client(sandbox, "scale", asynchronous=True) as plain:
        expected = [
            r.completion.text
            async for r in plain.complete_many(
                SCALE_MODEL, prompts, ordered=True, temperature=0, max_tokens=6
            )
        ]
    store = RedisStore(redis_server.url, timeout=0.5)
    try:
        async with client(sandbox, "scale", asynchronous=True, cache=store) as c:
            with caplog.at_level(logging.WARNING, "wrapper.cache"):
                got = []
                async for result in c.complete_many(
                    SCALE_MODEL, prompts, ordered=True, concurrency=4, temperature=0, max_tokens=6
                ):
                    got.append(result)
                    if len(got) == 20:
                        redis_server.kill()
    finally:
        store.close()
        redis_server.start()
    assert [r.completion.text for r in got] == expected
    assert len(caplog.records) == 1
    assert "could not" in caplog.records[0].getMessage()


# --- the router -------------------------------------------------------------------------------------------


def test_a_router_reads_and_writes_each_routes_entries(sandbox: Sandbox, cache_file: Path) -> None:
    from wrapper.router import Route, Router

    with Router([Route(client(sandbox, "scale"), SCALE_MODEL, name="us")]) as plain:
        router = plain.with_options(cache=str(cache_file))
        first = router.complete("Alice was", max_tokens=6)
        again = router.complete("Alice was", max_tokens=6)
        streamed = list(router.stream("The Queen", max_tokens=6))
        replayed = list(router.stream("The Queen", max_tokens=6))
        batch = router.complete_many(["Alice was", "The Queen"], ordered=True, max_tokens=6)
        results = list(batch)
    assert sent(sandbox) == 3  # the first complete, the first stream, and the batch's "The Queen"
    assert (again.text, again.cached, again.route) == (first.text, True, "us")
    assert [c.text for c in replayed] == [c.text for c in streamed]
    assert all(c.cached and c.route == "us" for c in replayed)
    assert [r.completion.cached for r in results] == [True, False]
    assert (batch.stats.cache_hits, batch.stats.cache_misses) == (1, 1)
    with client(sandbox, "scale", cache=cache_file) as c:  # a route's entry is the client's own
        assert c.complete(SCALE_MODEL, "Alice was", max_tokens=6).cached


def test_the_command_line_completes_from_the_cache(
    sandbox: Sandbox, cache_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wrapper._cli import main

    command = ["complete", "scale", SCALE_MODEL, "Alice was", "--base-url", sandbox.scale_base_url]
    command += ["--api-key", "k", "--max-tokens", "6", "--cache", str(cache_file), "--json"]
    assert main(command) == 0
    assert main(command) == 0
    first, again = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first["cached"], again["cached"], again["text"]) == (False, True, first["text"])
    assert sent(sandbox) == 1


async def test_a_raw_response_call_neither_reads_nor_writes(
    sandbox: Sandbox, cache_file: Path, library: ModuleType
) -> None:
    with client(sandbox, "scale", cache=cache_file) as c:
        raw = c.with_raw_response.complete(SCALE_MODEL, "Alice was", max_tokens=6)
        assert isinstance(raw.http_response, library.Response)
        assert raw.http_response.status_code == 200
        assert not c.complete(SCALE_MODEL, "Alice was", max_tokens=6).cached  # the raw call kept nothing
        assert c.with_raw_response.complete(SCALE_MODEL, "Alice was", max_tokens=6).parse().cached is False
    async with client(sandbox, "scale", asynchronous=True, cache=cache_file) as ac:
        await ac.with_raw_response.complete(SCALE_MODEL, "The Queen", max_tokens=6)
        assert not (await ac.complete(SCALE_MODEL, "The Queen", max_tokens=6)).cached
    assert sent(sandbox) == 5
    assert SQLiteStore(cache_file).stats().entries == 2
