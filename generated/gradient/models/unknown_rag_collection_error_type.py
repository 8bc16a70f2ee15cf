from typing import Literal

UnknownRagCollectionErrorType = Literal["unknownRagCollection"]

UNKNOWN_RAG_COLLECTION_ERROR_TYPE_VALUES: set[UnknownRagCollectionErrorType] = {
    "unknownRagCollection",
}


def check_unknown_rag_collection_error_type(
    value: str,
) -> UnknownRagCollectionErrorType:
    if value in UNKNOWN_RAG_COLLECTION_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {UNKNOWN_RAG_COLLECTION_ERROR_TYPE_VALUES!r}"
    )
