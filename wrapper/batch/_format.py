"""One format for a batch's results, wherever they come from: the result line.

The command line writes one per input (and target) into its results file, ``BatchResult.to_dict()`` gives
one in Python, and ``wrapper.ray`` adds the same fields as columns. Every line has the fields of
``RESULT_FIELDS``: a completion's (as ``Completion.to_dict()`` names them, but for ``raw`` and
``raw_type``) and ``error``, one of them empty. ``index`` is the input's position, ``id`` the input's own
id (when it has one), ``target`` the model or route of a fan-out; the command line adds ``fingerprint``, a
hash of the request. docs/batches.md publishes the JSON Schema of a line.

A results file of the command line also holds run records, ``{"run": {...}}`` lines saying what wrote
the results after them; ``read_results`` reads a file's result lines alone, the current one of each
input and target (``result_key`` says which lines are of one input).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wrapper import Completion

__all__ = [
    "RESULT_FIELDS",
    "RUN",
    "InputLineError",
    "completion_fields",
    "error_fields",
    "error_object",
    "read_results",
    "result_key",
]

RESULT_FIELDS = (
    "text",
    "finish_reason",
    "prompt_tokens",
    "response_tokens",
    "logprobs",
    "request_id",
    "route",
    "cached",
    "error",
)
"""The fields every result has beside ``index``: a completion's, and ``error`` (None on a success)."""

RUN = "run"
"""The one key of a results file's run record line."""


class InputLineError(ValueError):
    """An input that can't become a request (a line of the command line's input, a row of a Ray Dataset):
    not JSON, no prompt, a bad id or parameter. Its result is this error, and nothing is sent for it."""


_REFUSED = InputLineError.__name__  # a refused line's result is the line's at its position, whatever its id

Key = tuple[str | None, str, Any]
"""Which input (and target) a result line is for: ``(target, "id" or "index", value)``."""


def error_object(exc: BaseException) -> dict[str, Any]:
    """An error as a result line's ``error``: ``{"type", "status", "message"}`` (status None but for an
    HTTP status error)."""
    return {"type": type(exc).__name__, "status": getattr(exc, "status_code", None), "message": str(exc)}


def completion_fields(completion: Completion) -> dict[str, Any]:
    """A completion as a result line's fields (``error`` None)."""
    logprobs = completion.logprobs
    return {
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "response_tokens": completion.response_tokens,
        "logprobs": None if logprobs is None else [logprob.to_dict() for logprob in logprobs],
        "request_id": completion.request_id,
        "route": completion.route,
        "cached": completion.cached,
        "error": None,
    }


def error_fields(exc: BaseException, request_id: str | None = None) -> dict[str, Any]:
    """An error as a result line's fields (a completion's empty); ``request_id``: the server's, if it
    answered."""
    return {**dict.fromkeys(RESULT_FIELDS), "request_id": request_id, "error": error_object(exc)}


def result_key(line: Mapping[str, Any]) -> Key | None:
    """Which input (and target) a result line is for: by its ``id``, else by its ``index`` (a refused
    input line's always by its index); None when ``line`` is not a result line."""
    index, line_id, target = line.get("index"), line.get("id"), line.get("target")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None
    if target is not None and not isinstance(target, str):
        return None
    error = line.get("error")
    refused = isinstance(error, Mapping) and error.get("type") == _REFUSED
    if "id" in line and not refused:
        if isinstance(line_id, bool) or not isinstance(line_id, str | int):
            return None
        return target, "id", line_id
    return target, "index", index


def read_results(path: str) -> Iterator[dict[str, Any]]:
    """The result lines of a results file the command line wrote, in file order: one per input and
    target, its latest (a result whose request changed is written again), run records left out.

    For pandas: ``pandas.DataFrame(read_results("results.jsonl"))``.
    """
    latest: dict[Key, int] = {}
    for number, line in _lines(path):
        key = result_key(line)
        if key is not None:
            latest[key] = number
            if key[1] == "id":  # it replaced the result its input had by position, if any
                latest.pop((key[0], "index", line["index"]), None)
    for number, line in _lines(path):
        key = result_key(line)
        if key is not None and latest.get(key) == number:
            yield line


def _lines(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, "rb") as file:
        for number, raw in enumerate(file):
            if not raw.endswith(b"\n"):
                return  # a line cut short by a kill: not written yet
            line = json.loads(raw)
            if isinstance(line, dict):
                yield number, line
