from typing import Literal

CompletionRequestV2ReasoningEffort = Literal["high", "low", "medium"]

COMPLETION_REQUEST_V2_REASONING_EFFORT_VALUES: set[
    CompletionRequestV2ReasoningEffort
] = {
    "high",
    "low",
    "medium",
}


def check_completion_request_v2_reasoning_effort(
    value: str,
) -> CompletionRequestV2ReasoningEffort:
    if value in COMPLETION_REQUEST_V2_REASONING_EFFORT_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {COMPLETION_REQUEST_V2_REASONING_EFFORT_VALUES!r}"
    )
