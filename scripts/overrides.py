"""The hand-written part of the wrapper's surface: where its keywords and errors differ from the specs.

``make regen`` reads these tables with the normalised specs and emits ``generated/<api>/params.py``
(the keyword ``TypedDict`` and its checking rules) and ``generated/gradient/exceptions.py`` (one
exception class per tagged error body). Everything not named here comes from the spec: a new
request field becomes a keyword argument, a new error tag a ``<Tag>Error`` class. Edit a table
only to change an ergonomic choice (a reshape, a class name or parent), never to follow a spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reshape:
    """A keyword whose value is sent wrapped: ``{**constants, into: value}`` in the body field ``field``.

    It is checked against the schema of ``field``'s property ``into``.
    """

    field: str
    into: str
    constants: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Api:
    """One API's choices: the wrapped operation, the positional prompt, and the keyword arguments."""

    operation: str  # the normalised operationId of the one operation the client wraps
    prompt: str  # the body field that is the positional ``prompt``
    params_class: str  # the name of the keyword-parameter TypedDict
    hidden: tuple[str, ...] = ()  # body fields the client sets itself, not offered as keywords
    reshapes: dict[str, Reshape] = field(default_factory=dict)  # keyword -> how it is sent
    # Tagged error bodies (Gradient): the hand-written root, class names that are not <Tag>Error,
    # and parents other than the root (tag -> class name in scripts/templates/exceptions.py).
    error_base: str | None = None
    error_names: dict[str, str] = field(default_factory=dict)
    error_parents: dict[str, str] = field(default_factory=dict)
    error_parent_patterns: tuple[tuple[str, str], ...] = ()  # (regex on the tag, parent): first match
    error_docs: dict[str, str] = field(default_factory=dict)  # tag -> the class's one-line docstring


REQUEST_OPTIONS = (
    "cache",
    "cache_read",
    "cache_sample",
    "cache_write",
    "deadline",
    "extra_body",
    "extra_headers",
    "extra_query",
    "hooks",
    "max_retries",
    "retry",
    "stream_idle_timeout",
    "timeout",
)
"""Keyword arguments every client takes for itself (``wrapper._core.options.RequestOptions``): a request
field whose keyword would be one of these fails ``make regen``, naming it."""


GRADIENT = Api(
    operation="complete_model",
    prompt="query",
    params_class="GradientParams",
    reshapes={
        "guidance": Reshape(field="guidance", into="value", constants={"type": "choice"}),
        "rag_collection": Reshape(field="rag", into="collectionId"),
    },
    error_base="GradientError",
    error_names={
        "flaggedContent": "ContentFlaggedError",  # hand-written: it adds ``.samples``
        "failed": "GenerationFailedError",
        "modelDoesNotSupportGuidance": "GuidanceNotSupportedError",
    },
    error_parents={
        "unknownBaseModel": "UnknownModelError",
        "unknownModelAdapter": "UnknownModelError",
        "bodyParsingError": "PayloadValidationError",  # adds ``.validation_error``
        "queryOrPathParsingError": "PayloadValidationError",
    },
    error_parent_patterns=((r"^rag|Rag", "RagError"),),  # every RAG error, today's and later ones
    error_docs={
        "bodyParsingError": "Gradient could not parse the request body.",
        "queryOrPathParsingError": "Gradient could not parse the query string or path (e.g. the model id).",
        "failed": "Gradient's generation failed.",
        "modelDoesNotSupportGuidance": "The model does not support ``guidance``.",
        "unprocessableContent": "Gradient could not process the content of the request.",
        "noRagDocumentsFound": "The RAG collection had no documents for this query.",
        "ragRequiresAutoTemplating": "RAG needs ``auto_template`` left on.",
        "unknownRagCollection": "No RAG collection has that id.",
        "unknownBaseModel": "No base model has that id.",
        "unknownModelAdapter": "No fine-tuned model adapter has that id.",
    },
)

SCALE = Api(
    operation="create_completion",
    prompt="prompt",
    params_class="ScaleParams",
    hidden=("stream",),  # set by stream() / complete()
)

APIS = {"gradient": GRADIENT, "scale": SCALE}
