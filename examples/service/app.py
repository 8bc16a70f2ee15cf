# examples/service/app.py
"""A web service in front of both completion APIs (docs/services.md walks through it).

Run it with ``uvicorn app:app`` or ``gunicorn app:app --preload -w 4 -k uvicorn_worker.UvicornWorker``;
the clients read their credentials from the environment (``SGP_API_KEY``, ``GRADIENT_ACCESS_TOKEN``, ...).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from wrapper import AsyncCompletionStream
from wrapper.errors import (
    APIError,
    APIStatusError,
    APITimeoutError,
    BadRequestError,
    ContentFlaggedError,
    PayloadValidationError,
    RateLimitError,
    UnprocessableEntityError,
)
from wrapper.gradient import AsyncGradient
from wrapper.scale import AsyncScale

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}  # your deployment and model ids
STATUSES: list[tuple[type[Exception], int]] = [  # the first class an error is an instance of decides
    (ValueError, 422),  # the caller's options break the API's rules (checked before sending)
    (ContentFlaggedError, 422),  # the caller's prompt was flagged
    (PayloadValidationError, 422),  # the API refused the request the caller's input made
    (BadRequestError, 422),
    (UnprocessableEntityError, 422),
    (RateLimitError, 503),  # the account's rate limit, still met after the retries: try again later
    (APITimeoutError, 504),  # the call's deadline ran out, or the API did not answer in time
    (APIError, 502),  # the rest is the API's or the service's own (credentials, model id, outage)
]
log = logging.getLogger("service")
T = TypeVar("T")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """One client per API for the worker's lifetime: built in its event loop, closed at shutdown."""
    async with AsyncScale() as scale, AsyncGradient() as gradient:
        app.state.clients = {"scale": scale, "gradient": gradient}
        yield


app = FastAPI(lifespan=lifespan)


class Prompt(BaseModel):
    prompt: str = Field(min_length=1)
    api: Literal["scale", "gradient"] = "scale"
    max_tokens: int = Field(default=64, ge=1)
    deadline: float = Field(default=30.0, gt=0, le=120)  # seconds for the whole call, retries included


class CallerLeft(Exception):
    """The caller closed its connection before the answer was ready."""


def _call(request: Request, body: Prompt) -> tuple[AsyncScale | AsyncGradient, dict[str, Any]]:
    """The client for ``body.api`` and the call's keywords: its max-tokens keyword, its deadline."""
    client: AsyncScale | AsyncGradient = request.app.state.clients[body.api]
    return client, {client.API.max_tokens: body.max_tokens, "deadline": body.deadline}


async def unless_caller_leaves(request: Request, call: Awaitable[T]) -> T:
    """``call``'s result, or ``CallerLeft`` as soon as the caller disconnects: the call is cancelled,
    and its request to the API with it. Starlette notices a caller leaving only while it streams a
    response; before that (a JSON answer, a stream's first token) nothing else is watching."""
    task = asyncio.ensure_future(call)
    try:
        while not task.done():
            await asyncio.wait([task], timeout=0.1)
            if not task.done() and await request.is_disconnected():
                raise CallerLeft
        return task.result()
    finally:
        task.cancel()
        await asyncio.wait([task])  # cancelled through: the call's stream may be closed now


def status_of(error: Exception) -> int:
    """The HTTP status the service answers a failed call with (``STATUSES``)."""
    return next(status for kind, status in STATUSES if isinstance(error, kind))


def error_response(error: Exception) -> JSONResponse:
    """The HTTP answer for a failed call, with what the caller may see of the error."""
    status = status_of(error)
    if status == 502:  # not the caller's doing: logged, with the API's request id, for the service's own
        log.error("completion failed: %r (request id %s)", error, getattr(error, "request_id", None))
    headers = {}
    if status == 503 and isinstance(error, APIStatusError) and error.retry_after is not None:
        headers["retry-after"] = str(max(1, round(error.retry_after)))
    message = str(error) if status == 422 else type(error).__name__
    return JSONResponse({"error": message}, status_code=status, headers=headers)


@app.post("/complete")
async def complete(body: Prompt, request: Request) -> Response:
    """The whole completion as JSON."""
    client, options = _call(request, body)
    try:
        call = client.complete(MODELS[body.api], body.prompt, **options)
        result = await unless_caller_leaves(request, call)
    except CallerLeft:
        return Response(status_code=499)  # nobody reads it: nginx's code for a request the caller left
    except (APIError, ValueError) as exc:
        return error_response(exc)
    return JSONResponse(
        {"text": result.text, "finish_reason": result.finish_reason, "request_id": result.request_id}
    )


@app.post("/stream")
async def stream(body: Prompt, request: Request) -> Response:
    """The completion as server-sent events: ``data: {"text": ...}`` for each token, then ``event: done``
    with the finish reason, or ``event: error`` if the call fails once the answer has begun."""
    client, options = _call(request, body)
    try:
        chunks = client.stream(MODELS[body.api], body.prompt, **options)
    except ValueError as exc:  # the arguments are checked at once, before anything is sent
        return error_response(exc)
    try:  # until its first token a call can still fail with an HTTP status of its own
        await unless_caller_leaves(request, chunks.open())
    except CallerLeft:
        await chunks.aclose()
        return Response(status_code=499)
    except APIError as exc:
        await chunks.aclose()
        return error_response(exc)
    return StreamingResponse(events(chunks), media_type="text/event-stream")


async def events(chunks: AsyncCompletionStream) -> AsyncIterator[str]:
    """The stream's chunks as SSE events. Headers are sent by now: a failure is an ``error`` event.
    Starlette cancels this generator when the caller leaves; ``async with`` closes the API's stream."""
    async with chunks:
        try:
            async for chunk in chunks:
                if chunk.text:
                    yield f"data: {json.dumps({'text': chunk.text})}\n\n"
                if chunk.finish_reason is not None:
                    done = {"finish_reason": chunk.finish_reason, "request_id": chunk.request_id}
                    yield f"event: done\ndata: {json.dumps(done)}\n\n"
        except APIError as exc:
            log.error("stream failed: %r (request id %s)", exc, getattr(exc, "request_id", None))
            error = {"status": status_of(exc), "error": type(exc).__name__}
            yield f"event: error\ndata: {json.dumps(error)}\n\n"
