"""One limit kept by many processes through the public seam: ``limit_store=`` and ``limit_key=`` on
``complete_many``, ``Route``, ``Router``/``AsyncRouter`` and the command line, against a sandbox that
enforces the limit on a real socket and a real ``redis-server``.

The multi-process runs are the bench's shared-limit rows (``scripts/bench/shared_runs.py``) at smaller
sizes: processes started side by side, each told the whole limit, let go at once. They measure rates,
so they are ``serial``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis_server import RedisServer

from wrapper import AsyncRouter, Route, Router
from wrapper.pacing import RedisStore
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from shared_runs import Job, Outcome, Setup, run

pytestmark = pytest.mark.long("serial")  # 51 s of one process in the serial part

MODEL = "llama-3-8b-instruct"
PROCESSES = 4


def _run(sandbox: Sandbox, job: Job, processes: int, **setup: object) -> Outcome:
    at = dataclasses.replace(job, base_url=sandbox.scale_base_url)
    outcome = run(Setup(at, processes, **setup))  # type: ignore[arg-type]
    assert not outcome.failures, dict(outcome.failures)
    return outcome


@pytest.fixture
def limited() -> Iterator[Sandbox]:
    """A sandbox that keeps 1,200 requests a minute, as a deployment's limit."""
    with Sandbox(rpm=1200) as sandbox:
        yield sandbox


@pytest.mark.serial
@pytest.mark.parametrize("kind", ["router", "async router"])
def test_processes_sharing_a_store_keep_one_request_limit_together(
    limited: Sandbox, redis_url: str, kind: str
) -> None:
    job = Job(kind, "", 20, 16, 1200, store=redis_url)  # the key: the API, the sandbox's host, the model
    outcome = _run(limited, job, PROCESSES)
    stats = limited.stats()
    assert outcome.completed == 80
    assert stats.rate_limited <= 0.01 * stats.requests, stats
    assert 0.9 * 1200 <= outcome.rate() <= 1.1 * 1200


@pytest.mark.serial
def test_without_a_store_the_same_processes_spend_the_limit_each(limited: Sandbox) -> None:
    _run(limited, Job("async router", "", 20, 16, 1200), PROCESSES)
    stats = limited.stats()
    assert stats.rate_limited > 0.1 * stats.requests, stats  # each kept the whole limit: the server refused


@pytest.mark.serial
@pytest.mark.parametrize("kind", ["batch", "async batch"])
def test_two_batches_keep_one_token_limit_together(redis_url: str, kind: str) -> None:
    tpm = 24_000
    with Sandbox(tpm=tpm) as sandbox:
        job = Job(kind, "", 40, 16, None, tpm, store=redis_url, key="two batches", max_tokens=16)
        outcome = _run(sandbox, job, 2)
        stats = sandbox.stats()
    assert stats.rate_limited <= 0.01 * stats.requests, stats
    assert outcome.tokens * 60 / outcome.seconds <= 1.1 * tpm


@pytest.mark.serial
def test_processes_told_no_limit_find_the_servers_together(redis_url: str) -> None:
    limit = 3000
    with Sandbox(rpm=limit) as sandbox:
        outcome = _run(sandbox, Job("async router", "", 100, 16, store=redis_url), PROCESSES)
        stats = sandbox.stats()
    assert stats.rate_limited <= 0.1 * stats.requests, stats  # over 8 s: the opening's 429s weigh more
    assert outcome.rate() >= 0.85 * limit


@pytest.mark.serial
def test_redis_stopped_mid_run_loses_no_request_and_sends_none_unpaced(
    limited: Sandbox, redis_server: RedisServer, redis_url: str
) -> None:
    events = [(2.0, lambda _: redis_server.stop()), (4.0, lambda _: redis_server.start())]
    outcome = _run(limited, Job("async router", "", 40, 16, 1200, store=redis_url), PROCESSES, events=events)
    stats = limited.stats()
    assert outcome.completed == 160
    assert stats.rate_limited <= 0.01 * stats.requests, stats  # each process at its share meanwhile
    assert outcome.seconds <= 1.15 * 160 / 20


def test_a_route_cooling_down_in_one_process_is_cooling_in_every_other(redis_url: str) -> None:
    with Sandbox() as down, Sandbox() as up:
        down.inject(status=503, count=1000)
        first = Router(
            [Route(Scale(api_key="k", base_url=down.scale_base_url, max_retries=0), MODEL)],
            limit_store=RedisStore(redis_url),  # a store of its own: another process to the others
        )
        with pytest.raises(Exception, match="503"):
            first.complete("Hi", max_retries=2)  # three failures in a row: the route cools down
        seen = down.stats().requests
        other = Router(
            [
                Route(Scale(api_key="k", base_url=down.scale_base_url), MODEL, name="down"),
                Route(Scale(api_key="k", base_url=up.scale_base_url), MODEL, name="up"),
            ],
            limit_store=RedisStore(redis_url),
        )
        assert other.complete("Hi", max_tokens=4).route == "up"
        assert down.stats().requests == seen  # it did not try the route the first process cooled


def test_routes_of_different_models_naming_one_key_keep_one_limit(redis_url: str) -> None:
    with Sandbox() as sandbox, Scale(api_key="k", base_url=sandbox.scale_base_url) as client:
        for model in ("llama-3-8b-instruct", "mistral-7b-instruct"):
            route = Route(client, model, requests_per_minute=600, limit_key="one deployment")
            Router([route], limit_store=redis_url).complete("Hi", max_tokens=2)
    keys = redis.Redis.from_url(redis_url).keys("completion-clients:limit:{*}")
    assert keys == [b"completion-clients:limit:{one deployment}"]


async def test_an_async_router_and_a_batch_take_turns_of_one_limit_in_redis(redis_url: str) -> None:
    with Sandbox(rpm=600) as sandbox:
        client = AsyncScale(api_key="k", base_url=sandbox.scale_base_url)
        async with AsyncRouter(
            [Route(client, MODEL, requests_per_minute=600)], limit_store=redis_url
        ) as router:
            routed = [r async for r in router.complete_many(["Hi"] * 3, max_tokens=2)]
        async with AsyncScale(api_key="k", base_url=sandbox.scale_base_url) as batch_client:
            batched = [
                r
                async for r in batch_client.complete_many(
                    MODEL, ["Hi"] * 3, max_tokens=2, requests_per_minute=600, limit_store=redis_url
                )
            ]
    assert all(r.ok for r in routed + batched)
    keys = redis.Redis.from_url(redis_url).keys("completion-clients:limit:*")
    assert any(MODEL.encode() in key and b"127.0.0.1:" in key for key in keys), keys  # one key, theirs


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda c: Route(c, MODEL, limit_store="http://r:6379"),
            ValueError,
            "Route 'llama.*limit_store must be",
        ),
        (lambda c: Route(c, MODEL, limit_key=""), ValueError, "Route 'llama.*limit_key must be a non-empty"),
        (lambda c: Router([Route(c, MODEL)], limit_store=42), TypeError, "Router: limit_store must be"),
        (
            lambda c: c.complete_many(MODEL, ["Hi"], limit_key="k"),
            ValueError,
            "limit_key names a limit kept in a store: give limit_store",
        ),
        (
            lambda c: Router([Route(c, MODEL)]).complete_many(["Hi"], limit_store="redis://r"),
            ValueError,
            "pass no limit_store to its batch",
        ),
    ],
)
def test_bad_limit_stores_and_keys_are_refused_naming_the_field(
    make: object, error: type[Exception], message: str
) -> None:
    with Scale(api_key="k", base_url="http://127.0.0.1:9/") as client, pytest.raises(error, match=message):
        make(client)  # type: ignore[operator]


def test_the_command_lines_batches_share_a_limit_through_limit_store(redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"prompt": f"Hi {i}"}) + "\n" for i in range(4)))
    with Sandbox(rpm=600) as sandbox:
        env = {**os.environ, **sandbox.environ()}
        command = [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, "in.jsonl", "--max-tokens", "2"]
        given = ["--rpm", "600", "--limit-store", redis_url, "--limit-key", "cli jobs"]
        done = [
            subprocess.run(
                [*command, "-o", f"out{i}.jsonl", *given],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            for i in range(2)
        ]
    assert [d.returncode for d in done] == [0, 0], [d.stderr for d in done]
    assert redis.Redis.from_url(redis_url).exists("completion-clients:limit:{cli jobs}")
    bad = subprocess.run(
        [*command, "-o", "out.jsonl", "--limit-store", "localhost:6379"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "argument --limit-store: limit_store must be a Redis URL" in bad.stderr
