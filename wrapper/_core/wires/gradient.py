"""Gradient's ``POST /models/{id}/complete``, spoken through the generated client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import httpx

from wrapper._core.error_mapping import Malformed, body_of, status_class, status_error
from wrapper._core.results import Completion, ResponseHeaders
from wrapper._core.validate import (
    body_fields,
    check_params,
    parse_model,
    per_model,
    prompt_rule,
    rules,
)
from wrapper._generated.exceptions import with_status_class
from wrapper._generated.gradient.api.models import complete_model
from wrapper._generated.gradient.exceptions import ERRORS
from wrapper._generated.gradient.models import CompleteModelBodyParams, CompleteModelSuccess
from wrapper._generated.gradient.params import KEYWORDS, PROMPT
from wrapper.errors import APIStatusError, GradientError

# The constraints the spec states for each keyword argument (generated/gradient/params.py).
RULES = rules(KEYWORDS)
_PROMPT = prompt_rule(PROMPT)

STATUS_FIRST = frozenset({401, 403, 408, 409, 429})


class GradientWire:
    """Gradient's request bodies, results and errors, for one workspace."""

    def __init__(self, workspace_id: str) -> None:
        self._kwargs = per_model(
            lambda model, body: complete_model._get_kwargs(
                model, body=cast(CompleteModelBodyParams, body), x_gradient_workspace_id=workspace_id
            )
        )

    def request(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids.

        Gradient does not stream: ``stream`` is never true (``Api.streams`` is false).
        """
        body = body_fields(check_params(params, RULES), KEYWORDS)
        body[PROMPT["wire"]] = _PROMPT("prompt", prompt)
        return self._kwargs(model, body)

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The ``Completion`` in a 200 response's body (Gradient reports no token counts or logprobs)."""
        raw = parse_model(CompleteModelSuccess.from_dict, content)
        if not isinstance(raw.generated_output, str) or not isinstance(raw.finish_reason, str):
            raise Malformed("has generatedOutput or finishReason that is not a string")
        return Completion(raw.generated_output, raw.finish_reason, None, None, None, raw=raw, headers=headers)

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The error of a typed 4XX body by its ``type``; the status class for anything else.

        A typed error is also the status class of its status (``with_status_class``): its ``type``
        says what went wrong, its status how to treat it. Statuses that tell the caller what to do
        whatever the body says (authenticate, wait, retry: 401, 403, 408, 409, 429) keep their status
        class alone, so ``except RateLimitError`` always works. A body is read as typed only with a
        status the spec gives its ``type`` (any of them, for a ``type`` the spec does not name, which
        raises ``GradientError`` itself).
        """
        body = body_of(response)
        status = response.status_code
        kind = body.get("type") if isinstance(body, dict) else None
        known = ERRORS.get(kind) if isinstance(kind, str) else None
        allowed = known[2] if known is not None else _TYPED_STATUSES
        if not isinstance(kind, str) or status in STATUS_FIRST or not _in(status, allowed):
            return status_error(response, body)
        if known is None:
            text = body.get("message")
            message = f"HTTP {status} {kind}: {text}" if isinstance(text, str) else f"HTTP {status} {kind}"
            cls: type[GradientError] = with_status_class(GradientError, status_class(status))
            return cls(message, response=response, body=body, type=kind)
        parse, typed, _ = known
        try:
            raw = parse(body)
        except (KeyError, TypeError, ValueError, AttributeError):
            return status_error(response, body)
        message = f"HTTP {status} {raw.type_}: {raw.message}"
        cls = with_status_class(typed, status_class(status))
        return cls(message, response=response, body=body, type=kind, raw=raw)


_TYPED_STATUSES = tuple(sorted({key for _, _, keys in ERRORS.values() for key in keys}))
"""The spec's status keys of every response with a typed body."""


def _in(status: int, keys: tuple[str, ...]) -> bool:
    """Whether an error ``status`` is one of a spec's response keys (``404``, ``4XX``, ``default``)."""
    return any(key in (str(status), "default") or key.upper() == f"{status // 100}XX" for key in keys)
