from typing import Literal

FlaggedContentErrorType = Literal["flaggedContent"]

FLAGGED_CONTENT_ERROR_TYPE_VALUES: set[FlaggedContentErrorType] = {
    "flaggedContent",
}


def check_flagged_content_error_type(value: str) -> FlaggedContentErrorType:
    if value in FLAGGED_CONTENT_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {FLAGGED_CONTENT_ERROR_TYPE_VALUES!r}"
    )
