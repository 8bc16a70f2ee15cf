from typing import Literal

UnknownBaseModelErrorType = Literal["unknownBaseModel"]

UNKNOWN_BASE_MODEL_ERROR_TYPE_VALUES: set[UnknownBaseModelErrorType] = {
    "unknownBaseModel",
}


def check_unknown_base_model_error_type(value: str) -> UnknownBaseModelErrorType:
    if value in UNKNOWN_BASE_MODEL_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {UNKNOWN_BASE_MODEL_ERROR_TYPE_VALUES!r}"
    )
