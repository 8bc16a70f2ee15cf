from typing import Literal

ModelDoesNotSupportGuidanceErrorType = Literal["modelDoesNotSupportGuidance"]

MODEL_DOES_NOT_SUPPORT_GUIDANCE_ERROR_TYPE_VALUES: set[
    ModelDoesNotSupportGuidanceErrorType
] = {
    "modelDoesNotSupportGuidance",
}


def check_model_does_not_support_guidance_error_type(
    value: str,
) -> ModelDoesNotSupportGuidanceErrorType:
    if value in MODEL_DOES_NOT_SUPPORT_GUIDANCE_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {MODEL_DOES_NOT_SUPPORT_GUIDANCE_ERROR_TYPE_VALUES!r}"
    )
