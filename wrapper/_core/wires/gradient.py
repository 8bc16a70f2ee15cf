"""Gradient's ``POST /models/{id}/complete``, spoken through the generated client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import httpx

from wrapper._core.error_mapping import Malformed, body_of, status_error
from wrapper._core.results import Completion, ResponseHeaders
from wrapper._core.validate import (
    WireBody,
    body_fields,
    check_params,
    parse_model,
    path_segment,
    prompt_rule,
    rules,
)
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
        self._workspace_id = workspace_id

    def request(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids.

        Gradient does not stream: ``stream`` is never true (``Api.streams`` is false).
        """
        body = body_fields(check_params(params, RULES), KEYWORDS)
        body[PROMPT["wire"]] = _PROMPT("prompt", prompt)
        return complete_model._get_kwargs(
            path_segment("model", model),
            body=cast(CompleteModelBodyParams, WireBody(body)),
            x_gradient_workspace_id=self._workspace_id,
        )

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The ``Completion`` in a 200 response's body (Gradient reports no token counts or logprobs)."""
        raw = parse_model(CompleteModelSuccess.from_dict, content)
        if not isinstance(raw.generated_output, str) or not isinstance(raw.finish_reason, str):
            raise Malformed("has generatedOutput or finishReason that is not a string")
        return Completion(raw.generated_output, raw.finish_reason, None, None, None, raw=raw, headers=headers)

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The error of a typed 4XX body by its ``type``; the status class for anything else.

        Statuses that tell the caller what to do whatever the body says (authenticate, wait, retry:
        401, 403, 408, 409, 429) keep their status class, so ``except RateLimitError`` always works.
        A ``type`` the spec does not name raises ``GradientError`` itself.
        """
        body = body_of(response)
        status = response.status_code
        kind = body.get("type") if isinstance(body, dict) else None
        if not isinstance(kind, str) or not 400 <= status < 500 or status in STATUS_FIRST:
            return status_error(response, body)
        known = ERRORS.get(kind)
        if known is None:
            text = body.get("message")
            message = f"HTTP {status} {kind}: {text}" if isinstance(text, str) else f"HTTP {status} {kind}"
            return GradientError(message, response=response, body=body, type=kind)
        parse, cls = known
        try:
            raw = parse(body)
        except (KeyError, TypeError, ValueError, AttributeError):
            return status_error(response, body)
        message = f"HTTP {status} {raw.type_}: {raw.message}"
        return cls(message, response=response, body=body, type=kind, raw=raw)
