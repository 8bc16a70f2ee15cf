from typing import Literal

BodyParsingErrorType = Literal["bodyParsingError"]

BODY_PARSING_ERROR_TYPE_VALUES: set[BodyParsingErrorType] = {
    "bodyParsingError",
}


def check_body_parsing_error_type(value: str) -> BodyParsingErrorType:
    if value in BODY_PARSING_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {BODY_PARSING_ERROR_TYPE_VALUES!r}"
    )
