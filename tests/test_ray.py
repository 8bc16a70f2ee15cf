"""wrapper.ray's complete_dataset on a local Ray cluster, against the sandbox on a real socket."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import ray.data
import redis
from helpers import (
    ECHOES,
    ESCAPED_CREDENTIALS,
    LocalServer,
    arrivals,
    echo_secret_reply,
    fragments,
    install_command,
    most_in_any_window,
    result_schema,
)
from jsonschema import Draft202012Validator

from wrapper.pacing import LocalStore
from wrapper.ray import OUTPUT_COLUMNS, complete_dataset, summarize
from wrapper.sandbox import Sandbox

pytestmark = [
    pytest.mark.long("serial"),  # 74 s of one process in make test
    pytest.mark.timeout(300),  # Ray starts its worker processes on first use: seconds each
    # A rate held across the cluster, and the cluster's processes take both CPUs: the module runs alone,
    # and so starts Ray once.
    pytest.mark.serial,
    # Ray Data's DataContext warns about its own deprecated defaults when first built (ray 2.60).
    pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context"),
]

SECRET = "sk-ray-test-credential-0123456789"
MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
MAX_TOKENS = {"scale": {"max_tokens": 4}, "gradient": {"max_generated_token_count": 4}}


@pytest.fixture(scope="module")
def ray_temp_dir() -> Iterator[Path]:
    """Where the local cluster keeps its session, logs included (short: Ray puts sockets in it)."""
    path = Path(tempfile.mkdtemp(prefix="ray"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def local_cluster(ray_temp_dir: Path) -> Iterator[None]:
    """A two-CPU local Ray, shared by the module and shut down after it."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _temp_dir=str(ray_temp_dir),
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_sandbox() -> Iterator[Sandbox]:
    """The sandbox the workers talk to, recording every exchange (to count 429s)."""
    with Sandbox(seed=0, record=True) as server:
        yield server


@pytest.fixture
def served(ray_sandbox: Sandbox) -> Sandbox:
    """The module's sandbox with no fault queued and no exchange from an earlier test."""
    ray_sandbox.clear_faults()
    ray_sandbox.exchanges.clear()
    return ray_sandbox


def _options(api: str, sb: Sandbox, **extra: Any) -> dict[str, Any]:
    if api == "scale":
        return {
            "api_key": SECRET,
            "account_id": "acct",
            "base_url": sb.scale_base_url,
            "timeout": 10,
            **extra,
        }
    return {
        "access_token": SECRET,
        "workspace_id": "ws",
        "base_url": sb.gradient_base_url,
        "timeout": 10,
        **extra,
    }


def _prompts(n: int, fail: int | None = None, missing: int | None = None) -> ray.data.Dataset:
    """Rows ``{"id", "n", "prompt"}``; row ``fail`` fails at the sandbox, row ``missing`` has no prompt."""
    rows: list[dict[str, Any]] = [{"id": f"row-{i}", "n": i, "prompt": f"Alice {i}"} for i in range(n)]
    if fail is not None:
        rows[fail]["prompt"] = "Alice __fail__"
    if missing is not None:
        rows[missing]["prompt"] = None
    return ray.data.from_items(rows)


def test_every_row_comes_back_once_with_its_answer_or_its_error(local_cluster: None, served: Sandbox) -> None:
    rows: list[dict[str, Any]] = [
        {"id": f"row-{i}", "n": i, "prompt": f"Alice {i}", "max_tokens": 1 if i % 3 == 0 else None}
        for i in range(450)
    ]  # a row's own max_tokens, else the call's
    rows[123]["prompt"], rows[321]["prompt"] = "Alice __fail__", None  # fails at the sandbox; no prompt
    out = complete_dataset(
        ray.data.from_items(rows),
        "scale",
        MODELS["scale"],
        workers=2,
        concurrency=8,
        client_options=_options("scale", served, max_retries=0),  # the sandbox's 500 would be retried
        max_tokens=4,
    ).materialize()
    rows = out.take_all()
    assert Counter(r["id"] for r in rows) == Counter(f"row-{i}" for i in range(450))
    assert set(rows[0]) == {"id", "n", "prompt", "max_tokens", *OUTPUT_COLUMNS}
    validator = Draft202012Validator(result_schema())
    assert [r["id"] for r in rows if not validator.is_valid(r)] == []  # the one results format
    by_id = {r["id"]: r for r in rows}
    failed = by_id.pop("row-123")
    assert failed["error"]["type"] == "InternalServerError"
    assert failed["error"]["status"] == 500
    assert (failed["text"], failed["prompt"], failed["n"]) == (None, "Alice __fail__", 123)
    assert by_id.pop("row-321")["error"] == {
        "type": "InputLineError",
        "status": None,
        "message": "column 'prompt' holds NoneType, not a string",
    }
    for row in by_id.values():
        assert row["error"] is None
        assert row["text"]
        assert row["finish_reason"] in ("length", "stop")
        assert row["prompt_tokens"] >= 1
        assert 1 <= row["response_tokens"] <= (1 if row["n"] % 3 == 0 else 4)  # per row, as the line says
    assert len(served.exchanges) == 449  # one request a prompt, none repeated by a retried worker
    own = Counter(row["response_tokens"] for row in by_id.values() if row["n"] % 3 == 0)
    assert own == {1: 148}  # the row's max_tokens (150 rows, but for rows 123 and 321)
    assert max(row["response_tokens"] for row in by_id.values() if row["n"] % 3) == 4  # the call's
    assert summarize(out) == {
        "results": 450,
        "succeeded": 448,
        "failed": 2,
        "failures": {"InputLineError": 1, "InternalServerError": 1},
        "prompt_tokens": sum(r["prompt_tokens"] for r in by_id.values()),
        "response_tokens": sum(r["response_tokens"] for r in by_id.values()),
    }


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_one_requests_per_minute_limit_holds_for_all_workers_together(local_cluster: None, api: str) -> None:
    rpm, rows = 2400, 200  # 40 a second for the cluster, under the server's 50
    with Sandbox(seed=0, rpm=3000) as limited, arrivals(limited) as times:
        # Each answer takes 0.25 s, so a worker (8 in flight) manages 32 a second at most: the two
        # together could do 64, and only the shared limit holds them to 40.
        limited.inject(delay=0.25, rate=1.0)
        out = complete_dataset(
            _prompts(rows),
            api,  # type: ignore[arg-type]
            MODELS[api],
            workers=2,
            concurrency=8,  # blocks of 64 rows: both workers get some
            requests_per_minute=rpm,
            client_options=_options(api, limited),
            **MAX_TOKENS[api],
        ).take_all()
        stats = limited.stats()
    assert sorted(r["n"] for r in out) == list(range(rows))
    assert [r["error"] for r in out] == [None] * rows
    assert stats.rate_limited <= 0.02 * stats.requests
    assert len(times) == stats.requests
    assert stats.max_in_flight > 8  # both workers were sending at once
    # Each worker pacing itself would send 80 a second between them; the shared limit allows no
    # more than 40 a second plus one second's burst over any stretch of the run.
    assert most_in_any_window(times, rpm / 60) <= rpm / 60


def test_a_limit_kept_in_redis_holds_for_the_workers_in_place_of_the_jobs_actor(
    local_cluster: None, redis_url: str
) -> None:
    rpm, rows = 2400, 160  # as above: the workers could send 64 a second, the limit allows 40
    with Sandbox(seed=0, rpm=3000) as limited, arrivals(limited) as times:
        limited.inject(delay=0.25, rate=1.0)
        out = complete_dataset(
            _prompts(rows),
            "scale",
            MODELS["scale"],
            workers=2,
            concurrency=8,
            requests_per_minute=rpm,
            limit_store=redis_url,
            limit_key="ray job",
            client_options=_options("scale", limited),
            **MAX_TOKENS["scale"],
        ).take_all()
        stats = limited.stats()
    assert [r["error"] for r in out] == [None] * rows
    assert stats.max_in_flight > 8  # both workers were sending at once
    assert most_in_any_window(times, rpm / 60) <= rpm / 60
    assert redis.Redis.from_url(redis_url).exists("completion-clients:limit:{ray job}")  # kept there


def test_on_error_raise_fails_the_job_and_no_credential_shows_anywhere(
    local_cluster: None, served: Sandbox, ray_temp_dir: Path
) -> None:
    out = complete_dataset(
        _prompts(40, fail=5),
        "gradient",
        MODELS["gradient"],
        concurrency=4,
        requests_per_minute=6000,
        on_error="raise",
        client_options=_options("gradient", served),
    )
    with pytest.raises(Exception, match=r"on_error='raise'.*GenerationFailedError") as caught:
        out.take_all()
    # The failure, the plan, the stats and every process's log (drivers, workers, the coordinator actor,
    # Ray's own daemons) go without the token the workers sent.
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(out)
    assert SECRET not in str(out.stats())
    logs = [path for path in ray_temp_dir.rglob("*") if path.is_file() and "logs" in path.parts]
    assert any(path.name.startswith("worker-") for path in logs), "the workers wrote no log"
    secret = SECRET.encode()
    assert [str(path) for path in logs if secret in path.read_bytes()] == []


def test_a_credential_the_server_echoes_is_in_no_error_column(
    local_cluster: None, server: LocalServer
) -> None:
    """Each row's error names its failure with the key the server quoted back scrubbed, whatever its form."""
    key = ESCAPED_CREDENTIALS["scale"]["api_key"]
    server.script(*map(echo_secret_reply, ECHOES))  # the last, a garbled status line, for the rest
    out = complete_dataset(
        _prompts(2 * len(ECHOES)),
        "scale",
        MODELS["scale"],
        concurrency=1,
        client_options={"api_key": key, "base_url": server.url, "max_retries": 0, "timeout": 10},
    ).take_all()
    errors = [row["error"]["message"] for row in out]  # the error object's text: its type is a class name
    assert len(errors) == 2 * len(ECHOES)
    assert all("<redacted>" in error for error in errors)
    assert [part for part in fragments(key) if any(part in error for error in errors)] == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"api": "openai"}, "api must be one of 'gradient', 'scale'"),
        ({"on_error": "skip"}, "on_error must be 'column' or 'raise'"),
        ({"workers": 0}, "workers must be a positive integer"),
        ({"concurrency": 2.5}, "concurrency must be a positive integer"),
        ({"requests_per_minute": 0}, "requests_per_minute must be a number > 0"),
        ({"tokens_per_minute": "many"}, "tokens_per_minute must be a number > 0"),
        ({"prompt_column": "question"}, "prompt_column 'question' is not a column"),
        ({"client_options": {"api_key": None}}, "Scale needs api_key"),
        ({"limit_store": LocalStore()}, "limit_store must be a Redis URL or a RedisStore for Ray"),
        ({"limit_store": "localhost:6379"}, "limit_store must be a Redis URL"),
        ({"limit_key": "k"}, "limit_key names a limit kept in a store"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(
    local_cluster: None, monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any], message: str
) -> None:
    monkeypatch.delenv("SGP_API_KEY", raising=False)
    call: dict[str, Any] = {"api": "scale", "client_options": {"api_key": "k"}, **arguments}
    with pytest.raises(ValueError, match=message):
        complete_dataset(_prompts(3), call.pop("api"), "m", **call)


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_the_workers_speak_the_drivers_http_library(
    local_cluster: None, server: LocalServer, monkeypatch: pytest.MonkeyPatch, library: str
) -> None:
    """``COMPLETION_CLIENTS_HTTP`` set in the driver after the cluster started reaches the workers."""
    monkeypatch.setenv("COMPLETION_CLIENTS_HTTP", library)
    options = {"api_key": SECRET, "base_url": server.url, "timeout": 10}
    rows = complete_dataset(_prompts(4), "scale", "m", workers=1, client_options=options).take_all()
    assert [row["error"] for row in rows] == [None] * 4
    agents = {headers["user-agent"].split()[-1].partition("/")[0] for _, _, headers, _ in server.requests}
    assert agents == {library}


def test_a_column_it_would_add_is_refused(local_cluster: None) -> None:
    dataset = ray.data.from_items([{"prompt": "Alice", "error": "earlier"}])
    with pytest.raises(ValueError, match=r"already has column\(s\) \['error'\]"):
        complete_dataset(dataset, "scale", "m", client_options={"api_key": "k"})


def test_import_without_ray_names_the_extra() -> None:
    shim = "import sys; sys.modules['ray'] = None; import wrapper.ray"
    result = subprocess.run(
        [sys.executable, "-c", shim],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[1],
    )
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert install_command("ray").search(result.stderr), result.stderr


def test_workers_share_a_response_cache(local_cluster: None, served: Sandbox, redis_url: str) -> None:
    """A cache in the client options is every worker's: a re-run of the dataset sends nothing and gives
    back the same answers, each row saying it came from the cache."""
    rows = [{"id": i, "prompt": f"Prompt number {i}"} for i in range(120)]

    def run() -> list[dict[str, Any]]:
        out = complete_dataset(
            ray.data.from_items(rows),
            "scale",
            MODELS["scale"],
            workers=2,
            concurrency=8,
            client_options=_options("scale", served, cache=redis_url),
            max_tokens=4,
        )
        return sorted(out.take_all(), key=lambda row: row["id"])

    first = run()
    assert len(served.exchanges) == 120
    again = run()
    assert len(served.exchanges) == 120  # nothing more sent
    assert [r["text"] for r in again] == [r["text"] for r in first]
    assert [r["cached"] for r in first] == [False] * 120
    assert [r["cached"] for r in again] == [True] * 120
