from typing import Literal

UnprocessableContentErrorType = Literal["unprocessableContent"]

UNPROCESSABLE_CONTENT_ERROR_TYPE_VALUES: set[UnprocessableContentErrorType] = {
    "unprocessableContent",
}


def check_unprocessable_content_error_type(value: str) -> UnprocessableContentErrorType:
    if value in UNPROCESSABLE_CONTENT_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {UNPROCESSABLE_CONTENT_ERROR_TYPE_VALUES!r}"
    )
