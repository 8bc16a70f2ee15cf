"""Scale GP as the sandbox serves it: ``x-api-key``, FastAPI-style errors, logprobs, and SSE streams."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import _catalog
from ._catalog import Model
from ._handler import FAULT_HEADER, Call, Handler, sampling
from ._lm import Generation, Step
from ._validate import Invalid, Operation, error, parse_json

MODELS = (
    Model("llama-3-8b-instruct", 3, 2048, description="trigram"),
    Model("mistral-7b-instruct", 2, 512, description="bigram"),
)
_TEMPERATURE = 0.2  # Scale's "LLM Engine" default
_STREAM_FAILS_AFTER = 2  # chunks a ``__fail__`` stream sends before its error event


class ScaleHandler(Handler):
    """``POST /v4/models/{model_deployment_id}/completions``, streamed over SSE when the body asks."""

    name = "scale"
    title = "Scale"
    operation = Operation(
        name,
        "/v4/models/{model_deployment_id}/completions",
        "post",
        ("body",),
        ("max_tokens", "top_logprobs"),
    )
    models = MODELS
    models_label = "deployments"
    headers_help = "x-api-key: <any>"
    default_max_tokens = 100  # Scale's "LLM Engine" default
    prompt_field = "prompt"
    max_tokens_field = "max_tokens"
    credential_metavar = "KEY"
    credential_help = "x-api-key"
    credential_name = "the API key"
    credential_how = "the x-api-key header"

    def credential(self, request: Request) -> str:
        return request.headers.get("x-api-key", "")

    def wants_stream(self, raw: bytes) -> bool:
        try:
            body = parse_json(raw)
        except Invalid:
            return False
        return isinstance(body, dict) and body.get("stream") is True

    def bad_fault_header(self, message: str, value: str) -> Response:
        return self.invalid([error(("header", FAULT_HEADER), "value_error", message)])

    def status_error(self, status: int, message: str) -> Response:
        if status == 422:  # FastAPI's validation shape: one item naming the body
            return self.invalid([error(("body",), "sandbox_fault", message)])
        return JSONResponse({"detail": message}, status_code=status)

    def invalid(self, errors: list[dict[str, Any]]) -> Response:
        return JSONResponse({"detail": errors}, status_code=422)

    def unknown_model(self, model_id: str) -> Response:
        return JSONResponse({"detail": f"Model deployment {model_id!r} not found"}, status_code=404)

    def complete(self, call: Call) -> Response | AsyncGenerator[str, None]:
        model, lm, body = call.model, call.lm, call.body
        prompt: str = body["prompt"]
        prompt_tokens = lm.count(prompt)
        room = model.context - prompt_tokens
        max_tokens = int(body.get("max_tokens", min(self.default_max_tokens, room)))
        if max_tokens > room:
            msg = (
                f"prompt tokens ({prompt_tokens}) plus max_tokens exceed the context length ({model.context})"
            )
            return self.invalid([error(("body", "max_tokens"), "value_error", msg, max_tokens)])
        asked = sampling(
            body.get("temperature"),
            body.get("top_k"),
            body.get("top_p"),
            max_tokens,
            room,
            _TEMPERATURE,
            body.get("top_logprobs", 1) if body.get("logprobs") else 0,
            tuple(body.get("stop_sequences", ())),
        )
        failing = _catalog.FAIL_TRIGGER in prompt
        if failing and not call.stream:
            return JSONResponse({"detail": "Generation failed"}, status_code=500)
        generation = lm.generate(prompt, asked, call.rng)
        if call.stream:
            return _events(generation, prompt, prompt_tokens, bool(asked.top_logprobs), failing, call.settle)
        steps = list(generation)
        call.settle(prompt_tokens + generation.tokens)
        response: dict[str, Any] = {
            "completions": [[prompt, [generation.text]]],
            "finish_reason": generation.finish_reason,
            "prompt_tokens": prompt_tokens,
            "response_tokens": generation.tokens,
        }
        if asked.top_logprobs:
            response["choices"] = [{"index": 0, "logprobs": {"content": [_logprob(s) for s in steps]}}]
        return JSONResponse(response)

    def triggers_help(self) -> str:
        return f"""\
Error triggers (statuses):
  unknown deployment id -> 404; prompt + max_tokens over the context, or a negative
  max_tokens or top_logprobs -> 422
  prompt containing {_catalog.FAIL_TRIGGER!r} -> 500; in a stream, an `event: error` after
  {_STREAM_FAILS_AFTER} chunks"""


def _logprob(step: Step) -> dict[str, Any]:
    return {
        "token": step.token,
        "logprob": step.logprob,
        "bytes": list(step.token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in step.top_logprobs
        ],
    }


async def _events(
    generation: Generation,
    prompt: str,
    prompt_tokens: int,
    logprobs: bool,
    failing: bool,
    settle: Callable[[int], None],
) -> AsyncGenerator[str, None]:
    """One SSE event per generated token, then a final one with the finish reason and token counts
    (a ``failing`` one's error event after its first chunks instead).

    ``settle`` gets the tokens used (the prompt's and those generated) when the stream ends, however it ends.
    """
    try:
        for i, step in enumerate(generation):
            if failing and i == _STREAM_FAILS_AFTER:
                failed = {"detail": "Generation failed", "status_code": 500}
                yield f"event: error\ndata: {json.dumps(failed)}\n\n"
                return
            chunk: dict[str, Any] = {"completions": [[prompt, [step.delta]]]}
            if logprobs:
                chunk["choices"] = [{"index": 0, "logprobs": {"content": [_logprob(step)]}}]
            yield f"data: {json.dumps(chunk)}\n\n"
    finally:
        settle(prompt_tokens + generation.tokens)
    last = {
        "completions": [[prompt, [generation.tail]]],
        "finish_reason": generation.finish_reason,
        "prompt_tokens": prompt_tokens,
        "response_tokens": generation.tokens,
    }
    yield f"data: {json.dumps(last)}\n\n"


HANDLER = ScaleHandler()
