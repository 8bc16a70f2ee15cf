"""Gradient's ``POST /models/{id}/complete``, spoken through the generated client."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from generated.gradient.api.models import complete_model
from generated.gradient.models import (
    BodyParsingError,
    CompleteModelBodyParams,
    CompleteModelBodyParamsGuidance,
    CompleteModelBodyParamsRag,
    CompleteModelSuccess,
    FailedError,
    FlaggedContentError,
    ModelDoesNotSupportGuidanceError,
    NoRagDocumentsFoundError,
    QueryOrPathParsingError,
    RagRequiresAutoTemplatingError,
    UnknownBaseModelError,
    UnknownModelAdapterError,
    UnknownRagCollectionError,
    UnprocessableContentError,
)

from . import errors
from ._errors_map import Malformed, body_of, parse_model, status_error
from ._results import Completion, ResponseHeaders
from ._validate import boolean, check_params, number, path_segment, text, texts

# The constraints CompleteModelBodyParams states (tests/test_client_validation.py reads them from the spec).
RULES = {
    "max_generated_token_count": number(integer=True, gt=0, lt=512),
    "temperature": number(),
    "top_k": number(integer=True),
    "top_p": number(),
    "auto_template": boolean,
    "guidance": texts(min_items=1, max_items=10, item=text(min_length=1, max_length=32)),
    "rag_collection": text(min_length=1),
}
_NON_EMPTY = text(min_length=1)

# Each typed 4XX body, by its ``type``: the generated model that parses it and the error it raises.
ERRORS: dict[str, tuple[Callable[[Mapping[str, Any]], Any], type[errors.GradientError]]] = {
    "flaggedContent": (FlaggedContentError.from_dict, errors.ContentFlaggedError),
    "bodyParsingError": (BodyParsingError.from_dict, errors.BodyParsingError),
    "queryOrPathParsingError": (QueryOrPathParsingError.from_dict, errors.QueryOrPathParsingError),
    "failed": (FailedError.from_dict, errors.GenerationFailedError),
    "modelDoesNotSupportGuidance": (
        ModelDoesNotSupportGuidanceError.from_dict,
        errors.GuidanceNotSupportedError,
    ),
    "noRagDocumentsFound": (NoRagDocumentsFoundError.from_dict, errors.NoRagDocumentsFoundError),
    "ragRequiresAutoTemplating": (
        RagRequiresAutoTemplatingError.from_dict,
        errors.RagRequiresAutoTemplatingError,
    ),
    "unknownBaseModel": (UnknownBaseModelError.from_dict, errors.UnknownBaseModelError),
    "unknownModelAdapter": (UnknownModelAdapterError.from_dict, errors.UnknownModelAdapterError),
    "unknownRagCollection": (UnknownRagCollectionError.from_dict, errors.UnknownRagCollectionError),
    "unprocessableContent": (UnprocessableContentError.from_dict, errors.UnprocessableContentError),
}


STATUS_FIRST = frozenset({401, 403, 408, 409, 429})


class GradientWire:
    """Gradient's request bodies, results and errors, for one workspace."""

    def __init__(self, workspace_id: str) -> None:
        self._workspace_id = workspace_id

    def request(self, model: str, prompt: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids."""
        fields = check_params(params, RULES)
        if "guidance" in fields:
            fields["guidance"] = CompleteModelBodyParamsGuidance(type_="choice", value=fields["guidance"])
        if "rag_collection" in fields:
            fields["rag"] = CompleteModelBodyParamsRag(collection_id=fields.pop("rag_collection"))
        body = CompleteModelBodyParams(query=_NON_EMPTY("prompt", prompt), **fields)
        return complete_model._get_kwargs(
            path_segment("model", model), body=body, x_gradient_workspace_id=self._workspace_id
        )

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The ``Completion`` in a 200 response's body (Gradient reports no token counts or logprobs)."""
        raw = parse_model(CompleteModelSuccess.from_dict, content)
        if not isinstance(raw.generated_output, str) or not isinstance(raw.finish_reason, str):
            raise Malformed("has generatedOutput or finishReason that is not a string")
        return Completion(raw.generated_output, raw.finish_reason, None, None, None, raw=raw, headers=headers)

    def status_error(self, response: httpx.Response) -> errors.APIStatusError:
        """The error of a typed 4XX body by its ``type``; the status class for anything else.

        Statuses that tell the caller what to do whatever the body says (authenticate, wait, retry:
        401, 403, 408, 409, 429) keep their status class, so ``except RateLimitError`` always works.
        """
        body = body_of(response)
        kind = body.get("type") if isinstance(body, dict) else None
        known = ERRORS.get(kind) if isinstance(kind, str) else None
        if known is None or not 400 <= response.status_code < 500 or response.status_code in STATUS_FIRST:
            return status_error(response, body)
        parse, cls = known
        try:
            raw = parse(body)
        except (KeyError, TypeError, ValueError, AttributeError):
            return status_error(response, body)
        message = f"HTTP {response.status_code} {raw.type_}: {raw.message}"
        return cls(message, response=response, body=body, raw=raw)
