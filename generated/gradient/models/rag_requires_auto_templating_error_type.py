from typing import Literal

RagRequiresAutoTemplatingErrorType = Literal["ragRequiresAutoTemplating"]

RAG_REQUIRES_AUTO_TEMPLATING_ERROR_TYPE_VALUES: set[
    RagRequiresAutoTemplatingErrorType
] = {
    "ragRequiresAutoTemplating",
}


def check_rag_requires_auto_templating_error_type(
    value: str,
) -> RagRequiresAutoTemplatingErrorType:
    if value in RAG_REQUIRES_AUTO_TEMPLATING_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {RAG_REQUIRES_AUTO_TEMPLATING_ERROR_TYPE_VALUES!r}"
    )
