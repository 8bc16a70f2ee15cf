from typing import Literal

UnknownModelAdapterErrorType = Literal["unknownModelAdapter"]

UNKNOWN_MODEL_ADAPTER_ERROR_TYPE_VALUES: set[UnknownModelAdapterErrorType] = {
    "unknownModelAdapter",
}


def check_unknown_model_adapter_error_type(value: str) -> UnknownModelAdapterErrorType:
    if value in UNKNOWN_MODEL_ADAPTER_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {UNKNOWN_MODEL_ADAPTER_ERROR_TYPE_VALUES!r}"
    )
