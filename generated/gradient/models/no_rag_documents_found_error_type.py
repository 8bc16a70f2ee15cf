from typing import Literal

NoRagDocumentsFoundErrorType = Literal["noRagDocumentsFound"]

NO_RAG_DOCUMENTS_FOUND_ERROR_TYPE_VALUES: set[NoRagDocumentsFoundErrorType] = {
    "noRagDocumentsFound",
}


def check_no_rag_documents_found_error_type(value: str) -> NoRagDocumentsFoundErrorType:
    if value in NO_RAG_DOCUMENTS_FOUND_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {NO_RAG_DOCUMENTS_FOUND_ERROR_TYPE_VALUES!r}"
    )
