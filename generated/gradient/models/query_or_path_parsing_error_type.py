from typing import Literal

QueryOrPathParsingErrorType = Literal["queryOrPathParsingError"]

QUERY_OR_PATH_PARSING_ERROR_TYPE_VALUES: set[QueryOrPathParsingErrorType] = {
    "queryOrPathParsingError",
}


def check_query_or_path_parsing_error_type(value: str) -> QueryOrPathParsingErrorType:
    if value in QUERY_OR_PATH_PARSING_ERROR_TYPE_VALUES:
        return value
    raise TypeError(
        f"Unexpected value {value!r}. Expected one of {QUERY_OR_PATH_PARSING_ERROR_TYPE_VALUES!r}"
    )
