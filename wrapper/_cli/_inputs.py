"""The batch command's input: a JSONL file read lazily, one ``{"prompt": ..., "id": ..., params...}`` a line.

The file ``-`` is standard input. An input is a non-blank line; its ``index`` is its 0-based position in
the file (blank lines count as positions, and are reported, not sent). Its optional ``"id"`` (a string or
an integer) is what resume matches it by; a line with no id, or whose id is mistyped or already taken by
an earlier line, is matched by its index instead. A line that can't be sent (not JSON, no prompt, a bad
id, a parameter the client doesn't take) is handed to ``on_bad`` instead of stopping the run.

``input_size`` gives the size a regular file had when the run started; it is read no further, so lines
appended meanwhile (by another program, or by a run writing its results into its own input) are left
for the next run. A pipe, and standard input, have no size: they are read to their end.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, BinaryIO

__all__ = ["STDIO", "Id", "Input", "InputLineError", "count_inputs", "input_size", "named", "read_inputs"]

STDIO = "-"
"""The file name that stands for standard input (as the output: standard output)."""

Id = str | int
"""An input's own ``"id"``: compared as JSON values, so ``7`` and ``"7"`` are different ids."""

Input = tuple[int, Id | None, str, dict[str, Any]]
"""One input to send: its index, its id (None: it has none), its prompt and its parameters."""

_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


class InputLineError(ValueError):
    """An input line that can't become a request."""


def named(path: str) -> str:
    """The input's name in messages: ``<stdin>`` for ``-``."""
    return "<stdin>" if path == STDIO else path


def input_size(path: str) -> int | None:
    """The input's size now, to read no further; None for standard input, or a file that is no regular
    one (a pipe: no size)."""
    if path == STDIO:
        return None
    info = os.stat(path)
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def read_inputs(
    path: str,
    size: int | None,
    *,
    skip: Callable[[int, Id | None], bool],
    claim: Callable[[Id], bool],
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any], str], None],
    on_bad: Callable[[int, Id | None, InputLineError], None],
    on_blank: Callable[[int], None] = lambda index: None,
) -> Generator[Input, None, None]:
    """Yield each input within the first ``size`` bytes (None: all) not ``skip``-ped, its params over
    ``defaults`` and vetted, with its prompt, by ``check``.

    ``claim(id)`` is asked once per id, in file order, for every line (skipped or not): False means an
    earlier line has that id, which makes this line an ``InputLineError`` matched by its index.
    ``on_blank(index)`` hears of each blank line.
    """
    for index, line_id, fields in _keyed(path, size, claim, on_blank):
        if skip(index, line_id):
            continue
        try:
            if isinstance(fields, InputLineError):
                raise fields
            prompt, params = _prompt(fields)
            params = {**defaults, **params}
            check(params, prompt)
        except InputLineError as exc:
            on_bad(index, line_id, exc)
            continue
        yield index, line_id, prompt, params


def count_inputs(path: str, size: int, skip: Callable[[int, Id | None], bool]) -> tuple[int, int]:
    """How many inputs the file's first ``size`` bytes hold, and how many of them ``skip`` (one pass;
    a file with no size, a pipe, can't be read twice).

    Duplicate ids are not looked for here, so with duplicates the second number is an estimate.
    """
    total = skipped = 0
    for index, line_id, _ in _keyed(path, size, claim=lambda _: True):
        total += 1
        skipped += skip(index, line_id)
    return total, skipped


def _keyed(
    path: str,
    size: int | None,
    claim: Callable[[Id], bool],
    on_blank: Callable[[int], None] = lambda index: None,
) -> Iterator[tuple[int, Id | None, dict[str, Any] | InputLineError]]:
    """Each input's index, its valid id (or None) and its other fields, or why it can't be read."""
    with _opened(path) as lines:
        for index, line in enumerate(lines if size is None else _within(lines, size)):
            if not line.strip():
                on_blank(index)
                continue
            try:
                fields = _object(line)
                yield index, _take_id(fields, claim), fields
            except InputLineError as exc:
                yield index, None, exc


@contextmanager
def _opened(path: str) -> Iterator[BinaryIO]:
    """The input, read as bytes: the file, or standard input for ``-`` (left open)."""
    if path == STDIO:
        yield sys.stdin.buffer
        return
    with open(path, "rb") as file:
        yield file


def _within(file: BinaryIO, size: int) -> Iterator[bytes]:
    """The lines of the file's first ``size`` bytes."""
    while size > 0 and (line := file.readline(size)):
        size -= len(line)
        yield line


def _object(line: bytes) -> dict[str, Any]:
    line = line.rstrip(b"\r\n")  # not the text's: an error at its end is reported there, not past the break
    try:
        fields = json.loads(line.decode("utf-8-sig"))  # a byte-order mark, if any, is not the line's
    except UnicodeDecodeError as exc:
        raise InputLineError(f"not UTF-8 text (byte {exc.start + 1} is not UTF-8)") from None
    except json.JSONDecodeError as exc:  # the line is one line: its column is all there is to say
        raise InputLineError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(fields, dict):
        raise InputLineError(f"expected a JSON object, got {_JSON_TYPES[type(fields)]}")
    return fields


def _take_id(fields: dict[str, Any], claim: Callable[[Id], bool]) -> Id | None:
    """Remove and return the line's ``"id"`` (None when it has none)."""
    if "id" not in fields:
        return None
    line_id = fields.pop("id")
    if isinstance(line_id, bool) or not isinstance(line_id, (str, int)):
        raise InputLineError(f'"id" must be a string or an integer, not {_JSON_TYPES[type(line_id)]}')
    if not claim(line_id):
        raise InputLineError(f'duplicate "id" {json.dumps(line_id)}: an earlier line has it')
    return line_id


def _prompt(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    prompt = fields.pop("prompt", None)
    if not isinstance(prompt, str) or not prompt:
        raise InputLineError('"prompt" must be a non-empty string')
    return prompt, fields
