"""Contains all the data models used in inputs/outputs"""

from .body_parsing_error import BodyParsingError
from .body_parsing_error_payload import BodyParsingErrorPayload
from .body_parsing_error_type import BodyParsingErrorType
from .complete_model_body_params import CompleteModelBodyParams
from .complete_model_body_params_guidance import CompleteModelBodyParamsGuidance
from .complete_model_body_params_guidance_type import (
    CompleteModelBodyParamsGuidanceType,
)
from .complete_model_body_params_rag import CompleteModelBodyParamsRag
from .complete_model_success import CompleteModelSuccess
from .failed_error import FailedError
from .failed_error_type import FailedErrorType
from .flagged_content_error import FlaggedContentError
from .flagged_content_error_payload import FlaggedContentErrorPayload
from .flagged_content_error_payload_flagged_content_item import (
    FlaggedContentErrorPayloadFlaggedContentItem,
)
from .flagged_content_error_type import FlaggedContentErrorType
from .model_does_not_support_guidance_error import ModelDoesNotSupportGuidanceError
from .model_does_not_support_guidance_error_type import (
    ModelDoesNotSupportGuidanceErrorType,
)
from .no_rag_documents_found_error import NoRagDocumentsFoundError
from .no_rag_documents_found_error_type import NoRagDocumentsFoundErrorType
from .query_or_path_parsing_error import QueryOrPathParsingError
from .query_or_path_parsing_error_payload import QueryOrPathParsingErrorPayload
from .query_or_path_parsing_error_type import QueryOrPathParsingErrorType
from .rag_requires_auto_templating_error import RagRequiresAutoTemplatingError
from .rag_requires_auto_templating_error_type import RagRequiresAutoTemplatingErrorType
from .unknown_base_model_error import UnknownBaseModelError
from .unknown_base_model_error_type import UnknownBaseModelErrorType
from .unknown_model_adapter_error import UnknownModelAdapterError
from .unknown_model_adapter_error_type import UnknownModelAdapterErrorType
from .unknown_rag_collection_error import UnknownRagCollectionError
from .unknown_rag_collection_error_type import UnknownRagCollectionErrorType
from .unprocessable_content_error import UnprocessableContentError
from .unprocessable_content_error_type import UnprocessableContentErrorType

__all__ = (
    "BodyParsingError",
    "BodyParsingErrorPayload",
    "BodyParsingErrorType",
    "CompleteModelBodyParams",
    "CompleteModelBodyParamsGuidance",
    "CompleteModelBodyParamsGuidanceType",
    "CompleteModelBodyParamsRag",
    "CompleteModelSuccess",
    "FailedError",
    "FailedErrorType",
    "FlaggedContentError",
    "FlaggedContentErrorPayload",
    "FlaggedContentErrorPayloadFlaggedContentItem",
    "FlaggedContentErrorType",
    "ModelDoesNotSupportGuidanceError",
    "ModelDoesNotSupportGuidanceErrorType",
    "NoRagDocumentsFoundError",
    "NoRagDocumentsFoundErrorType",
    "QueryOrPathParsingError",
    "QueryOrPathParsingErrorPayload",
    "QueryOrPathParsingErrorType",
    "RagRequiresAutoTemplatingError",
    "RagRequiresAutoTemplatingErrorType",
    "UnknownBaseModelError",
    "UnknownBaseModelErrorType",
    "UnknownModelAdapterError",
    "UnknownModelAdapterErrorType",
    "UnknownRagCollectionError",
    "UnknownRagCollectionErrorType",
    "UnprocessableContentError",
    "UnprocessableContentErrorType",
)
