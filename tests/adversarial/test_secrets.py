"""Secrets: a whole session with DEBUG logging on never shows the Gradient token or the Scale key.

Both clients, sync and async, go through success, streaming, retries, typed errors, timeouts, resets,
a batch and a server that echoes the request's headers back in its answers; every log record (of every
logger, formatted with its traceback), every exception's text and ``repr`` and every result's ``repr``
is searched for either credential.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from wrapper import testing
from wrapper.errors import APIError, APIResponseValidationError, APIStatusError
from wrapper.sandbox import Sandbox

from ._clients import MODELS, SECRETS, new_client, sandbox_client

SCALE_MODEL, GRADIENT_MODEL = MODELS["scale"], MODELS["gradient"]


class Seen:
    """Every text the session produced that a user or a log could show."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, *objects: Any) -> None:
        for obj in objects:
            self.texts += [str(obj), repr(obj)]
            if isinstance(obj, BaseException):
                self.texts += ["".join(traceback.format_exception(obj)), repr(obj.args)]
                if isinstance(obj, APIError):
                    self.texts += [obj.message, repr(obj.request)]

    def outcome(self, call: Any, *args: Any, **kwargs: Any) -> None:
        """Run ``call`` and keep what it returned or raised."""
        try:
            result = call(*args, **kwargs)
            self.add(*(result if isinstance(result, list) else [result]))
        except APIError as exc:
            self.add(exc)

    async def aoutcome(self, call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            result = await call(*args, **kwargs)
            self.add(*(result if isinstance(result, list) else [result]))
        except APIError as exc:
            self.add(exc)


@pytest.fixture
def seen(caplog: pytest.LogCaptureFixture) -> Iterator[Seen]:
    """A ``Seen`` that also gets every log record (DEBUG and up, all loggers) once the test has run."""
    testing.set_testing(True)  # retries do not wait
    caplog.set_level(logging.DEBUG)
    for name in ("wrapper", "httpx", "httpcore", "aiohttp", "asyncio", "uvicorn", "uvicorn.error"):
        caplog.set_level(logging.DEBUG, logger=name)
    found = Seen()
    try:
        yield found
    finally:
        testing.set_testing(False)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    records = caplog.get_records("call")
    found.texts += [formatter.format(record) for record in records]
    found.texts += [repr(record.args) for record in records]
    assert records, "DEBUG logging was on, so the session logged"
    leaked = [text for text in found.texts if any(secret in text for secret in SECRETS)]
    assert leaked == []


def test_a_sync_session_never_shows_a_credential(fault_sandbox: Sandbox, seen: Seen) -> None:
    with (
        sandbox_client(fault_sandbox, "scale", timeout=0.2) as scale,
        sandbox_client(fault_sandbox, "gradient", timeout=0.2) as gradient,
    ):
        seen.add(scale, gradient, scale.with_options(max_retries=0), gradient.with_options(timeout=1.0))
        seen.outcome(scale.complete, SCALE_MODEL, "Alice", max_tokens=4, logprobs=True, top_logprobs=2)
        seen.outcome(lambda: list(scale.stream(SCALE_MODEL, "Alice", max_tokens=4)))
        seen.outcome(gradient.complete, GRADIENT_MODEL, "Is Alice tired?", guidance=["yes", "no"])
        seen.outcome(lambda: list(gradient.stream(GRADIENT_MODEL, "Alice")))
        for api, client, model in (("scale", scale, SCALE_MODEL), ("gradient", gradient, GRADIENT_MODEL)):
            fault_sandbox.inject(status=503, count=1, api=api)  # queued rules compose: one at a time
            seen.outcome(client.complete, model, "retried after a 503, then fine")
            fault_sandbox.inject(status=429, retry_after=1, count=1, api=api)
            seen.outcome(client.complete, model, "retried after a 429, then fine")
            for fault in (
                {"status": 503, "count": 3},
                {"reset": True, "count": 3},
                {"delay": 0.4, "count": 3},
            ):
                fault_sandbox.inject(**fault, api=api)
                seen.outcome(client.complete, model, "retried until the budget is spent")
            seen.outcome(client.complete, "no-such-model", "Alice")
        seen.outcome(scale.complete, SCALE_MODEL, "Alice " * 3000, max_tokens=100)  # 422
        seen.outcome(gradient.complete, GRADIENT_MODEL, "where is the contraband")  # flaggedContent
        seen.outcome(gradient.complete, "llama2-7b-chat", "Alice", guidance=["yes"])  # no guidance
        seen.outcome(gradient.complete, GRADIENT_MODEL, "Alice", rag_collection="nope")
        fault_sandbox.inject(cut=1, api="scale")
        seen.outcome(lambda: list(scale.stream(SCALE_MODEL, "Alice", max_tokens=8)))
        seen.outcome(lambda: list(scale.stream(SCALE_MODEL, "__fail__ Alice", max_tokens=8)))
        fault_sandbox.inject(status=503, count=2, api="scale")
        batch = list(scale.complete_many(SCALE_MODEL, ["a", "b", "c"], return_exceptions=True, max_tokens=2))
        seen.add(*batch, *(r.error for r in batch if r.error))


async def test_an_async_session_never_shows_a_credential(fault_sandbox: Sandbox, seen: Seen) -> None:
    async with (
        sandbox_client(fault_sandbox, "scale", asynchronous=True, timeout=0.2) as scale,
        sandbox_client(fault_sandbox, "gradient", asynchronous=True, timeout=0.2) as gradient,
    ):
        seen.add(scale, gradient)
        await seen.aoutcome(scale.complete, SCALE_MODEL, "Alice", max_tokens=4)

        async def chunks(stream: Any) -> list[Any]:
            return [chunk async for chunk in stream]

        await seen.aoutcome(chunks, scale.stream(SCALE_MODEL, "Alice", max_tokens=4))
        await seen.aoutcome(chunks, gradient.stream(GRADIENT_MODEL, "Alice"))
        for api, client, model in (("scale", scale, SCALE_MODEL), ("gradient", gradient, GRADIENT_MODEL)):
            fault_sandbox.inject(status=429, retry_after_ms=5, count=1, api=api)
            await seen.aoutcome(client.complete, model, "retried once")
            for fault in (
                {"status": 500, "count": 3},
                {"reset": True, "count": 3},
                {"delay": 0.4, "count": 3},
            ):
                fault_sandbox.inject(**fault, api=api)
                await seen.aoutcome(client.complete, model, "retried until the budget is spent")
        await seen.aoutcome(gradient.complete, "unknown_model_adapter", "Alice")
        fault_sandbox.inject(cut=1, api="scale")
        await seen.aoutcome(chunks, scale.stream(SCALE_MODEL, "Alice", max_tokens=8))
        batch = await chunks(
            gradient.complete_many(GRADIENT_MODEL, ["a", "contraband"], return_exceptions=True)
        )
        seen.add(*batch, *(r.error for r in batch if r.error))
    await asyncio.sleep(0)


def _echo(request: httpx.Request) -> httpx.Response:
    """A server (or proxy) that puts the request's headers into its answer, as some debugging proxies do."""
    headers = dict(request.headers)
    status = int(request.url.params.get("status", "400"))
    if "/v4/" in request.url.path and status == 200:
        return httpx.Response(200, json={"completions": "not a list", "echo": headers})
    return httpx.Response(
        status, json={"detail": f"bad request: {headers}", "type": "failed", "message": str(headers)}
    )


@pytest.mark.parametrize("status", [200, 400, 401, 429, 500])
def test_credentials_echoed_back_by_the_server_are_scrubbed(seen: Seen, status: int) -> None:
    def http() -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(_echo), params={"status": status})

    for api in ("scale", "gradient"):
        with new_client(api, "https://echo/api", max_retries=1, http_client=http()) as client:
            with pytest.raises((APIStatusError, APIResponseValidationError)) as caught:
                client.complete(MODELS[api], "Alice")
            assert any(secret in caught.value.response.text for secret in SECRETS)  # the answer did carry one
            seen.add(caught.value)
