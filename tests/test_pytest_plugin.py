"""The pytest plugin (``wrapper.pytest_plugin``), run by pytester in a fresh pytest process."""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import pytest
from helpers import install_command

pytestmark = pytest.mark.long("parallel")  # 31-55 s of one process in make test

pytest_plugins = ["pytester"]

PLUGIN = "wrapper.pytest_plugin"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest in a subprocess, loading the plugin by name when its entry point is not installed."""
    installed = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", PLUGIN]
    return pytester.runpytest_subprocess(*plugin, "-p", "no:randomly", "-p", "no:cacheprovider", *args)


USING_EVERY_FIXTURE = """
import pytest
from wrapper import errors

SCALE, GRADIENT = "llama-3-8b-instruct", "nous-hermes2"
texts = []
closed = []


def test_sync_clients_and_an_injected_fault(sandbox, scale_client, gradient_client):
    texts.append(scale_client.complete(SCALE, "Alice", max_tokens=8, temperature=1.0).text)
    assert gradient_client.complete(GRADIENT, "Alice", max_generated_token_count=4).text
    sandbox.inject(status=503, api="scale", count=5)
    with pytest.raises(errors.InternalServerError):
        scale_client.with_options(max_retries=0).complete(SCALE, "Alice")
    sandbox.inject(status=429, retry_after=0, count=1, api="gradient")
    assert gradient_client.complete(GRADIENT, "Alice", max_generated_token_count=4).text  # retried
    assert sandbox.stats().requests == 5
    closed.append(scale_client)


def test_each_test_starts_afresh(sandbox, scale_client):
    with pytest.raises(RuntimeError, match="closed"):  # the last test's client was closed after it
        closed[0].complete(SCALE, "Alice", max_tokens=2)
    assert sandbox.stats().requests == 0
    # the four faults left over are gone, and sampling starts from the seed again
    assert scale_client.complete(SCALE, "Alice", max_tokens=8, temperature=1.0).text == texts[0]


@pytest.mark.asyncio
async def test_async_clients(sandbox, async_scale_client, async_gradient_client):
    sandbox.inject("status=500", api="gradient")
    with pytest.raises(errors.InternalServerError):
        await async_gradient_client.with_options(max_retries=0).complete(GRADIENT, "Alice")
    chunks = [chunk async for chunk in async_scale_client.stream(SCALE, "Alice", max_tokens=3)]
    assert chunks[-1].finish_reason is not None


def test_the_session_sandbox_is_the_one_sandbox_resets(sandbox_session, sandbox):
    assert sandbox_session is sandbox
    assert sandbox_session.url.startswith("http://127.0.0.1:")


def test_a_wrong_expectation_fails(scale_client):
    assert scale_client.complete(SCALE, "Alice", max_tokens=2).text == "surely not"
"""


def test_the_fixtures_give_running_sandboxes_and_clients_and_faults_work(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USING_EVERY_FIXTURE)
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_a_wrong_expectation_fails FAILED*", "*surely not*"])


def test_without_the_sandbox_extra_only_the_fixtures_fail_naming_the_extra(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import sys
        sys.modules["uvicorn"] = None  # as if the sandbox extra were not installed: importing it fails
        """
    )
    pytester.makepyfile(
        test_user="""
        def test_plain():
            assert 1 + 1 == 2

        def test_with_sandbox(sandbox):
            pass
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*the sandbox fixtures need the sandbox extra (uvicorn is missing): pip install *"]
    )
    assert install_command("sandbox").search(result.stdout.str())


A_CALLER_LEAVES_THEN_THE_NEXT_TEST_COUNTS = """
import pytest
from wrapper import errors
from wrapper.sandbox import Stats


def test_a_caller_gives_up_during_a_delay(sandbox, scale_client):
    sandbox.inject(delay=30)
    with pytest.raises(errors.APITimeoutError):
        scale_client.with_options(timeout=0.2, max_retries=0).complete("llama-3-8b-instruct", "Alice")


def test_the_next_test_counts_its_own_requests_only(sandbox, scale_client):
    assert scale_client.complete("llama-3-8b-instruct", "Alice", max_tokens=2).text
    assert sandbox.stats() == Stats(requests=1, in_flight=0, max_in_flight=1)
    assert [exchange.status for exchange in sandbox.exchanges] == [200]
"""


def test_a_request_an_earlier_test_gave_up_on_is_not_counted_in_the_next(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=A_CALLER_LEAVES_THEN_THE_NEXT_TEST_COUNTS)
    _run(pytester).assert_outcomes(passed=2)


USING_THE_ENVIRONMENT = """
import os

import pytest

from wrapper.gradient import AsyncGradient
from wrapper.scale import Scale


def make_scale():  # the application's own factory: its settings come from the environment
    return Scale()


def test_clients_built_from_the_environment_use_the_sandbox(sandbox_env):
    with make_scale() as scale:
        assert scale.complete("llama-3-8b-instruct", "Alice", max_tokens=2).response_tokens == 2
    assert os.environ["SGP_CLIENT_BASE_URL"] == sandbox_env.scale_base_url
    assert [e.path for e in sandbox_env.exchanges] == ["/v4/models/llama-3-8b-instruct/completions"]


@pytest.mark.asyncio
async def test_async_clients_too(sandbox_env):
    async with AsyncGradient() as gradient:
        answer = await gradient.complete("nous-hermes2", "Is Alice tall?", guidance=["yes", "no"])
    assert answer.text in ("yes", "no")
    assert sandbox_env.stats().requests == 1


def test_the_environment_is_the_users_again_after(sandbox):
    assert os.environ["SGP_CLIENT_BASE_URL"] == "https://scale.example"
    assert "GRADIENT_ACCESS_TOKEN" not in os.environ
"""


def test_sandbox_env_points_clients_built_from_the_environment_at_the_sandbox(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.startswith(("SGP_", "GRADIENT_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", "https://scale.example")
    pytester.makepyfile(test_user=USING_THE_ENVIRONMENT)
    _run(pytester).assert_outcomes(passed=3)


def test_a_failing_test_shows_what_the_sandbox_answered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        def test_fails(sandbox, scale_client):
            sandbox.inject("status=503;retry-after=0")
            scale_client.with_options(max_retries=0).complete("llama-3-8b-instruct", "Alice")
        """
    )
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- Captured log call -*",
            "INFO *wrapper.sandbox* POST /v4/models/llama-3-8b-instruct/completions 503 *s"
            " fault=status=503;retry-after=0 id=sandbox-*",
        ]
    )
