"""Scale GP's ``POST /v4/models/{model_deployment_id}/completions``, spoken through the generated client."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import httpx
from httpx_sse import ServerSentEvent

from wrapper._core.error_mapping import Malformed, body_of, status_error, status_message
from wrapper._core.results import (
    Completion,
    CompletionChunk,
    Deferred,
    ResponseHeaders,
    TokenLogprob,
    completion,
    stream_chunk,
)
from wrapper._core.validate import (
    body_fields,
    check_params,
    json_object,
    model,
    per_model,
    prompt_rule,
    rules,
)
from wrapper._generated.scale.api.models import create_completion
from wrapper._generated.scale.models import CompletionRequestV2, CompletionResponse, HTTPValidationError
from wrapper._generated.scale.params import KEYWORDS, PROMPT
from wrapper._generated.scale.types import Unset
from wrapper.errors import APIStatusError, UnprocessableEntityError

# The constraints the spec states for each keyword argument (generated/scale/params.py).
RULES = rules(KEYWORDS)
_PROMPT = prompt_rule(PROMPT)
_KWARGS = per_model(
    lambda model, body: create_completion._get_kwargs(
        model_deployment_id=model, body=cast(CompletionRequestV2, body)
    )
)


class ScaleWire:
    """Scale's request bodies, results and errors."""

    def request(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids."""
        body = body_fields(check_params(params, RULES), KEYWORDS)
        body[PROMPT["wire"]] = _PROMPT("prompt", prompt)
        if stream:
            body["stream"] = True
        return _KWARGS(model, body)

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The ``Completion`` in a 200 response's body; ``Malformed`` if it is not what the spec says."""
        return _result(completion, json_object(content), headers)

    def chunk(
        self, event: ServerSentEvent, response: httpx.Response, headers: ResponseHeaders
    ) -> CompletionChunk | None:
        """The chunk one stream event carries (None for an empty one); an ``error`` event raises its error."""
        if event.event == "error":
            body = _json_or_text(event.data)
            status = body.get("status_code", body.get("status")) if isinstance(body, dict) else None
            if not isinstance(status, int) or isinstance(status, bool) or status < 400:
                status = 500
            raise self._error(response, body, status)
        data = event.data
        if not data:
            return None
        try:
            return _result(stream_chunk, json_object(data), headers)
        except Malformed as exc:
            raise exc.at(response, data) from None

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The typed error of an error response; a 422 carries its ``(loc, msg, type)`` list."""
        return self._error(response, body_of(response), response.status_code)

    def _error(self, response: httpx.Response, body: Any, status: int) -> APIStatusError:
        errors = _validation_errors(body) if status == 422 else None
        if errors is None:
            return status_error(response, body, status=status)
        detail = "; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg, _ in errors)
        error = UnprocessableEntityError(
            status_message(response, status, body, detail or None), response=response, body=body
        )
        error.status_code = status
        error.errors = errors
        return error


def _json_or_text(data: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's stack allows
        return data


def _validation_errors(body: Any) -> list[tuple[tuple[int | str, ...], str, str]] | None:
    """A 422 body's ``(loc, msg, type)`` list, parsed by the generated ``HTTPValidationError``, or None."""
    if not isinstance(body, dict):
        return None
    try:
        detail = HTTPValidationError.from_dict(body).detail
        items = (
            [] if isinstance(detail, Unset) else [(tuple(e.loc), str(e.msg), str(e.type_)) for e in detail]
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return items


R = TypeVar("R", Completion, CompletionChunk)


def _result(make: Callable[..., R], data: dict[str, Any], headers: ResponseHeaders) -> R:
    """A result (``make``: ``results.completion`` or ``stream_chunk``) with the text, finish reason and token
    counts of a response body, checked against the spec; the arguments go by position (faster).

    The generated model is built now when there are ``choices`` (logprobs need it); otherwise on
    first use of ``raw``, so the shape it walks (a list of lists) is checked here: a result that is
    returned always has a ``raw`` that builds. One function, no helpers: a stream runs it per chunk.
    """
    if "completions" not in data:
        raise Malformed("does not match the spec (KeyError: 'completions')")
    completions = data["completions"]
    if not isinstance(completions, list):
        raise Malformed("has completions that are not a list of [prompt, [outputs]] pairs")
    for item in completions:
        if not isinstance(item, list):
            raise Malformed("has completions that are not a list of [prompt, [outputs]] pairs")
    text = ""
    if completions:  # [[prompt, [output, ...]], ...]: the first output for the first prompt
        pair = completions[0]
        if len(pair) != 2 or not isinstance(pair[1], list):
            raise Malformed("has a completions item that is not a [prompt, [outputs]] pair")
        if pair[1]:
            text = pair[1][0]
            if not isinstance(text, str):
                raise Malformed("has a completion that is not a string")
    finish_reason = data.get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise Malformed("has a finish_reason that is not a string")
    prompt_tokens, response_tokens = data.get("prompt_tokens"), data.get("response_tokens")
    # ``type(...) is int`` refuses booleans too
    if (prompt_tokens is not None and type(prompt_tokens) is not int) or (
        response_tokens is not None and type(response_tokens) is not int
    ):
        raise Malformed("has a token count that is not an integer")
    if "choices" in data:
        raw = model(CompletionResponse.from_dict, data)
        return make(text, finish_reason, prompt_tokens, response_tokens, _logprobs(raw), raw, headers)
    deferred: Deferred[CompletionResponse] = (CompletionResponse.from_dict, data)
    return make(text, finish_reason, prompt_tokens, response_tokens, None, deferred, headers)


def _logprobs(raw: CompletionResponse) -> tuple[TokenLogprob, ...] | None:
    if isinstance(raw.choices, Unset) or not raw.choices:
        return None
    logprobs = raw.choices[0].logprobs
    if isinstance(logprobs, Unset) or isinstance(logprobs.content, Unset):
        return None
    try:
        return tuple(
            TokenLogprob(
                str(token.token),
                float(token.logprob),
                tuple((str(top.token), float(top.logprob)) for top in token.top_logprobs),
            )
            for token in logprobs.content
        )
    except (TypeError, ValueError) as exc:
        raise Malformed(f"has logprobs of the wrong type ({exc})") from None
