from typing import Literal

FailedErrorType = Literal["failed"]

FAILED_ERROR_TYPE_VALUES: set[FailedErrorType] = {
    "failed",
}


def check_failed_error_type(value: str) -> FailedErrorType:
    if value in FAILED_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {FAILED_ERROR_TYPE_VALUES!r}"
    )
