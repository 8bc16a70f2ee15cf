from typing import Literal

CompleteModelBodyParamsGuidanceType = Literal["choice"]

COMPLETE_MODEL_BODY_PARAMS_GUIDANCE_TYPE_VALUES: set[
    CompleteModelBodyParamsGuidanceType
] = {
    "choice",
}


def check_complete_model_body_params_guidance_type(
    value: str,
) -> CompleteModelBodyParamsGuidanceType:
    if value in COMPLETE_MODEL_BODY_PARAMS_GUIDANCE_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {COMPLETE_MODEL_BODY_PARAMS_GUIDANCE_TYPE_VALUES!r}"
    )
