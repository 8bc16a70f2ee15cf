"""The batch command's input: a JSONL file read lazily, one ``{"prompt": ..., params...}`` per line.

Input ``index`` is the line's 0-based position in the file; blank lines are not inputs. A line that
can't be sent (not JSON, no prompt, a parameter the client doesn't take) is handed to ``on_bad``
with its line number instead of stopping the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from typing import Any

from wrapper._batch import Job

__all__ = ["InputLineError", "count_inputs", "read_jobs"]


class InputLineError(ValueError):
    """An input line that can't become a request."""


def read_jobs(
    path: str,
    *,
    skip: Callable[[int], bool],
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any]], None],
    on_bad: Callable[[int, InputLineError], None],
) -> Generator[Job, None, None]:
    """Yield a job per input line not ``skip``-ped, its params over ``defaults`` and vetted by ``check``."""
    with open(path, "rb") as lines:
        for index, line in enumerate(lines):
            if skip(index) or not line.strip():
                continue
            try:
                prompt, params = _parse(line)
                params = {**defaults, **params}
                check(params)
            except InputLineError as exc:
                on_bad(index, exc)
                continue
            yield index, prompt, params


def count_inputs(path: str, skip: Callable[[int], bool]) -> tuple[int, int]:
    """How many inputs the file holds, and how many of them ``skip`` (one streaming pass)."""
    total = skipped = 0
    with open(path, "rb") as lines:
        for index, line in enumerate(lines):
            if line.strip():
                total += 1
                skipped += skip(index)
    return total, skipped


def _parse(line: bytes) -> tuple[str, dict[str, Any]]:
    try:
        fields = json.loads(line)
    except ValueError as exc:
        raise InputLineError(f"not JSON ({exc})") from None
    if not isinstance(fields, dict):
        raise InputLineError(f"expected a JSON object, got {type(fields).__name__}")
    prompt = fields.pop("prompt", None)
    if not isinstance(prompt, str) or not prompt:
        raise InputLineError('"prompt" must be a non-empty string')
    return prompt, fields
