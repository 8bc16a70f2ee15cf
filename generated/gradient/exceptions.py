"""One ``GradientError`` subclass per ``type`` of the typed error bodies, and the tag table.

Written by scripts/regen.py from specs/gradient.json and scripts/overrides.py; never edited by hand.
Its classes subclass the hand-written bases in ``generated/exceptions.py`` (copied from
scripts/templates/exceptions.py); ``wrapper.errors`` re-exports both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import (
    ContentFlaggedError,
    GradientError,
    PayloadValidationError,
    RagError,
    UnknownModelError,
)
from . import models

__all__ = [
    "BodyParsingError",
    "GenerationFailedError",
    "GuidanceNotSupportedError",
    "NoRagDocumentsFoundError",
    "QueryOrPathParsingError",
    "RagRequiresAutoTemplatingError",
    "UnknownBaseModelError",
    "UnknownModelAdapterError",
    "UnknownRagCollectionError",
    "UnprocessableContentError",
]


class BodyParsingError(PayloadValidationError):
    """Gradient could not parse the request body."""

    raw: models.BodyParsingError


class QueryOrPathParsingError(PayloadValidationError):
    """Gradient could not parse the query string or path (e.g. the model id)."""

    raw: models.QueryOrPathParsingError


class GenerationFailedError(GradientError):
    """Gradient's generation failed."""

    raw: models.FailedError


class GuidanceNotSupportedError(GradientError):
    """The model does not support ``guidance``."""

    raw: models.ModelDoesNotSupportGuidanceError


class NoRagDocumentsFoundError(RagError):
    """The RAG collection had no documents for this query."""

    raw: models.NoRagDocumentsFoundError


class RagRequiresAutoTemplatingError(RagError):
    """RAG needs ``auto_template`` left on."""

    raw: models.RagRequiresAutoTemplatingError


class UnknownBaseModelError(UnknownModelError):
    """No base model has that id."""

    raw: models.UnknownBaseModelError


class UnknownModelAdapterError(UnknownModelError):
    """No fine-tuned model adapter has that id."""

    raw: models.UnknownModelAdapterError


class UnknownRagCollectionError(RagError):
    """No RAG collection has that id."""

    raw: models.UnknownRagCollectionError


class UnprocessableContentError(GradientError):
    """Gradient could not process the content of the request."""

    raw: models.UnprocessableContentError


# Each typed error body by its ``type``: the generated model that parses it, the error it raises,
# and the responses of the spec (their status keys: 4XX, 404, default) whose body it may be.
ERRORS: dict[
    str, tuple[Callable[[Mapping[str, Any]], Any], type[GradientError], tuple[str, ...]]
] = {
    "flaggedContent": (
        models.FlaggedContentError.from_dict,
        ContentFlaggedError,
        ("4XX",),
    ),
    "bodyParsingError": (models.BodyParsingError.from_dict, BodyParsingError, ("4XX",)),
    "queryOrPathParsingError": (
        models.QueryOrPathParsingError.from_dict,
        QueryOrPathParsingError,
        ("4XX",),
    ),
    "failed": (models.FailedError.from_dict, GenerationFailedError, ("4XX",)),
    "modelDoesNotSupportGuidance": (
        models.ModelDoesNotSupportGuidanceError.from_dict,
        GuidanceNotSupportedError,
        ("4XX",),
    ),
    "noRagDocumentsFound": (
        models.NoRagDocumentsFoundError.from_dict,
        NoRagDocumentsFoundError,
        ("4XX",),
    ),
    "ragRequiresAutoTemplating": (
        models.RagRequiresAutoTemplatingError.from_dict,
        RagRequiresAutoTemplatingError,
        ("4XX",),
    ),
    "unknownBaseModel": (
        models.UnknownBaseModelError.from_dict,
        UnknownBaseModelError,
        ("4XX",),
    ),
    "unknownModelAdapter": (
        models.UnknownModelAdapterError.from_dict,
        UnknownModelAdapterError,
        ("4XX",),
    ),
    "unknownRagCollection": (
        models.UnknownRagCollectionError.from_dict,
        UnknownRagCollectionError,
        ("4XX",),
    ),
    "unprocessableContent": (
        models.UnprocessableContentError.from_dict,
        UnprocessableContentError,
        ("4XX",),
    ),
}
