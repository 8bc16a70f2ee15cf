"""The service of docs/router.md whose workers share one limit (``examples/shared_limit/``): under gunicorn
with four workers, against a sandbox keeping the route's limit, the workers keep it together."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import clean_environment, gunicorn_serving

from wrapper.sandbox import Sandbox

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "shared_limit"
WORKERS = 4
LIMIT = 600  # the route's requests a minute in the app, which the sandbox keeps
REQUESTS = 40


@pytest.fixture
def limited() -> Iterator[Sandbox]:
    with Sandbox(rpm=LIMIT) as sandbox:
        yield sandbox


@pytest.fixture
def service(limited: Sandbox, redis_url: str, tmp_path: Path) -> Iterator[str]:
    """The app under gunicorn (4 uvicorn workers) on a free port, sharing its limit through ``redis_url``."""
    env = clean_environment(
        SGP_API_KEY="key", SGP_CLIENT_BASE_URL=limited.scale_base_url, LIMIT_STORE=redis_url
    )
    log = tmp_path / "gunicorn.log"
    with gunicorn_serving(EXAMPLE, env, log, workers=WORKERS, ready="Application startup complete") as url:
        yield url


@pytest.mark.serial  # a rate
def test_four_workers_keep_the_limit_together(service: str, limited: Sandbox) -> None:
    """40 requests, 16 at a time, over the four workers: none meets a 429 (each worker alone would send
    at the whole limit, four times it), and they take the time the limit gives them."""
    bodies = [{"prompt": f"Alice {i}", "max_tokens": 4} for i in range(REQUESTS)]
    with (
        httpx.Client(base_url=service, timeout=60) as caller,
        concurrent.futures.ThreadPoolExecutor(16) as pool,
    ):
        started = time.monotonic()
        answers = list(pool.map(lambda body: caller.post("/complete", json=body), bodies))
        took = time.monotonic() - started
    assert [answer.status_code for answer in answers] == [200] * REQUESTS
    stats = limited.stats()
    assert stats.rate_limited == 0, stats
    # at most a quarter second's budget at once and the first lease of half a second early: no faster
    assert took >= (REQUESTS - LIMIT / 60 * 0.75) * 60 / LIMIT * 0.9
