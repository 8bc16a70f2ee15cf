"""Contains all the data models used in inputs/outputs"""

from .chat_completion_token_logprob import ChatCompletionTokenLogprob
from .choice import Choice
from .choice_logprobs import ChoiceLogprobs
from .completion_request_v2 import CompletionRequestV2
from .completion_request_v2_chat_template_kwargs import (
    CompletionRequestV2ChatTemplateKwargs,
)
from .completion_request_v2_reasoning_effort import CompletionRequestV2ReasoningEffort
from .completion_response import CompletionResponse
from .http_validation_error import HTTPValidationError
from .parameter_bindings import ParameterBindings
from .parameter_bindings_bindings import ParameterBindingsBindings
from .top_logprob import TopLogprob
from .validation_error import ValidationError
from .validation_error_context import ValidationErrorContext

__all__ = (
    "ChatCompletionTokenLogprob",
    "Choice",
    "ChoiceLogprobs",
    "CompletionRequestV2",
    "CompletionRequestV2ChatTemplateKwargs",
    "CompletionRequestV2ReasoningEffort",
    "CompletionResponse",
    "HTTPValidationError",
    "ParameterBindings",
    "ParameterBindingsBindings",
    "TopLogprob",
    "ValidationError",
    "ValidationErrorContext",
)
