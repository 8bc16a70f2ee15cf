"""Logging by ``SGP_CLIENT_LOG`` / ``GRADIENT_LOG``: levels, the stderr handler, redaction, bad values."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from wrapper._core import logs as _logging
from wrapper.gradient import API as GRADIENT_API
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import API as SCALE_API
from wrapper.scale import Scale

SECRET = "sk-very-secret-credential"
SCRIPT = """
import asyncio
from wrapper import testing
from wrapper.{module} import Async{cls}, {cls}

testing.set_testing(True)  # the retry is made at once


async def main() -> None:
    async with Async{cls}({credentials}, base_url={base_url!r}) as client:
        await client.complete({model!r}, "Alice", {max_tokens}=3)


if {is_async}:
    asyncio.run(main())
else:
    with {cls}({credentials}, base_url={base_url!r}) as client:
        client.complete({model!r}, "Alice", {max_tokens}=3)
"""
CASES = {
    "scale": ("Scale", f"api_key={SECRET!r}", "llama-3-8b-instruct", SCALE_API),
    "gradient": ("Gradient", f"access_token={SECRET!r}, workspace_id='ws'", "nous-hermes2", GRADIENT_API),
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


def run_client(sandbox: Sandbox, api: str, mode: str, value: str) -> str:
    """The stderr of a fresh interpreter that sets ``api``'s variable to ``value`` and makes one call,
    retried once after a 503; logging is not configured there, as in a script that never heard of it."""
    cls, credentials, model, descriptor = CASES[api]
    base_url = sandbox.scale_base_url if api == "scale" else sandbox.gradient_base_url
    code = SCRIPT.format(
        module=api,
        cls=cls,
        is_async=mode == "async",
        credentials=credentials,
        base_url=base_url,
        model=model,
        max_tokens=descriptor.max_tokens,
    )
    sandbox.inject(status=503, count=1, api=api)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in (SCALE_API.log_env, GRADIENT_API.log_env)
    }
    env[descriptor.log_env] = value
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize(("api", "mode"), [("scale", "sync"), ("gradient", "async")])
def test_debug_prints_each_response_and_retry_with_credentials_redacted(
    sandbox: Sandbox, api: str, mode: str
) -> None:
    lines = run_client(sandbox, api, mode, "DEBUG").splitlines()
    responses = [line for line in lines if " - DEBUG] POST " in line]
    retries = [line for line in lines if " - INFO] retrying POST " in line]
    assert [line.split(" -> ")[1][:3] for line in responses] == ["503", "200"], lines
    assert len(retries) == 1, lines
    assert "(retry 1 of 2)" in retries[0]
    assert "'<redacted>'" in responses[0]
    assert all(SECRET not in line and SECRET[-10:] not in line for line in lines)
    assert lines[0].startswith("[20")  # openai-python's format: [time - where - level] message
    assert " - wrapper." in lines[0]  # the package's logger, then the module


@pytest.mark.parametrize(("api", "mode"), [("scale", "async"), ("gradient", "sync")])
def test_info_prints_retries_only(sandbox: Sandbox, api: str, mode: str) -> None:
    lines = run_client(sandbox, api, mode, "info").splitlines()
    assert len(lines) == 1, lines
    assert " - INFO] retrying POST " in lines[0]
    assert "after: HTTP 503" in lines[0]


@pytest.fixture
def fresh_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """The package's logger as if no client had been built yet in this process; restored afterwards."""
    logger = logging.getLogger("wrapper")
    level, handlers, seen = logger.level, list(logger.handlers), set(_logging._seen)
    monkeypatch.delenv(SCALE_API.log_env, raising=False)
    monkeypatch.delenv(GRADIENT_API.log_env, raising=False)
    logger.setLevel(logging.NOTSET)
    _logging._seen.clear()
    yield logger
    logger.setLevel(level)
    logger.handlers[:] = handlers
    _logging._seen.clear()
    _logging._seen.update(seen)


def scale_on(sandbox: Sandbox) -> Scale:
    return Scale(api_key=SECRET, base_url=sandbox.scale_base_url, max_retries=0)


def gradient_on(sandbox: Sandbox) -> Gradient:
    return Gradient(access_token=SECRET, workspace_id="ws", base_url=sandbox.gradient_base_url, max_retries=0)


def test_a_configured_application_gets_the_lines_once_through_its_own_handlers(
    sandbox: Sandbox,
    fresh_logging: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SGP_CLIENT_LOG", "debug")
    with scale_on(sandbox) as scale:
        scale.complete("llama-3-8b-instruct", "Alice", max_tokens=3)
    assert fresh_logging.level == logging.DEBUG
    messages = [record.getMessage() for record in caplog.records if record.name == "wrapper"]
    assert len(messages) == 1
    assert "-> 200 in" in messages[0]
    assert "'x-api-key': '<redacted>'" in messages[0]
    assert SECRET not in messages[0]
    assert capsys.readouterr().err == ""  # pytest's handler on the root logger has them: not printed twice


def test_the_variable_is_read_once_per_api_when_its_first_client_is_built(
    sandbox: Sandbox, fresh_logging: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale_on(sandbox).close()  # no variable set yet
    monkeypatch.setenv("SGP_CLIENT_LOG", "debug")
    scale_on(sandbox).close()
    assert fresh_logging.level == logging.NOTSET  # Scale's was read already
    monkeypatch.setenv("GRADIENT_LOG", "info")
    gradient_on(sandbox).close()
    assert fresh_logging.level == logging.INFO  # Gradient's first client reads its own


def test_the_more_verbose_of_the_two_variables_wins(
    sandbox: Sandbox, fresh_logging: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADIENT_LOG", "Debug")
    monkeypatch.setenv("SGP_CLIENT_LOG", "INFO")
    gradient_on(sandbox).close()
    scale_on(sandbox).close()
    assert fresh_logging.level == logging.DEBUG
    assert len(fresh_logging.handlers) == 1  # one handler, however many APIs switch it on


def test_a_bad_value_warns_at_the_line_that_built_the_client(
    sandbox: Sandbox, fresh_logging: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADIENT_LOG", "trace")
    with pytest.warns(
        RuntimeWarning, match=r"GRADIENT_LOG='trace' is not a log level: use 'info' or 'debug'"
    ) as w:
        client = gradient_on(sandbox)
    with client:
        assert client.complete("nous-hermes2", "Alice", max_generated_token_count=2).text is not None
    assert w[0].filename == __file__
    assert fresh_logging.level == logging.NOTSET
    assert fresh_logging.handlers == []
