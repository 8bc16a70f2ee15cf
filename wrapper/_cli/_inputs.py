"""The batch command's input: a JSONL file read lazily, one ``{"prompt": ..., "id": ..., params...}`` a line.

The file ``-`` is standard input. An input is a non-blank line; its ``index`` is its 0-based position in
the file (blank lines count as positions, and are reported, not sent). Its optional ``"id"`` (a string or
an integer) is what resume matches it by; a line with no id, or whose id is mistyped or already taken by
an earlier line, is matched by its index instead. A line that can't be sent (not JSON, no prompt, a bad
id, a parameter the client doesn't take) is a ``Line`` with its ``error``: its results say why, and
nothing is sent for it.

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

import attrs

from wrapper.batch import InputLineError

__all__ = ["STDIO", "Id", "InputLineError", "Line", "input_size", "named", "read_lines"]

STDIO = "-"
"""The file name that stands for standard input (as the output: standard output)."""

Id = str | int
"""An input's own ``"id"``: compared as JSON values, so ``7`` and ``"7"`` are different ids."""

_JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


@attrs.frozen
class Line:
    """One input line: its ``index``, its ``id`` (None: it has none, one that can't be used, or it is
    refused: it is then matched by its index), the id as written (``given``: ``{"id": ...}`` if it has
    one, copied to its results), and either its ``prompt`` and ``params`` (over the defaults) or the
    ``error`` that refuses it; ``raw`` is the line's bytes (its fingerprint's, when refused)."""

    index: int
    id: Id | None
    given: dict[str, Any]
    raw: bytes
    prompt: str = ""
    params: dict[str, Any] = attrs.field(factory=dict)
    error: InputLineError | None = None


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


def read_lines(
    path: str,
    size: int | None,
    *,
    claim: Callable[[Id], bool],
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any], str], None],
    on_blank: Callable[[int], None] = lambda index: None,
) -> Generator[Line, None, None]:
    """Each non-blank line within the first ``size`` bytes (None: all), its params over ``defaults`` and
    vetted, with its prompt, by ``check``.

    ``claim(id)`` is asked once per id, in file order: False means an earlier line has that id, which
    makes this line an ``InputLineError`` matched by its index. ``on_blank(index)`` hears of each blank
    line.
    """
    with _opened(path) as lines:
        for index, line in enumerate(lines if size is None else _within(lines, size)):
            if not line.strip():
                on_blank(index)
                continue
            raw = line.rstrip(b"\r\n")
            given: dict[str, Any] = {}
            line_id: Id | None = None
            try:
                fields = _object(raw)
                if "id" in fields:
                    given["id"] = fields.pop("id")
                    line_id = _checked_id(given["id"], claim)
                prompt, params = _prompt(fields)
                params = {**defaults, **params}
                check(params, prompt)
            except InputLineError as exc:  # a refused line's results are matched by its index
                yield Line(index, None, given, raw, error=exc)
                continue
            yield Line(index, line_id, given, raw, prompt, params)


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


def _object(raw: bytes) -> dict[str, Any]:
    try:
        fields = json.loads(raw.decode("utf-8-sig"))  # a byte-order mark, if any, is not the line's
    except UnicodeDecodeError as exc:
        raise InputLineError(f"not UTF-8 text (byte {exc.start + 1} is not UTF-8)") from None
    except json.JSONDecodeError as exc:  # the line is one line: its column is all there is to say
        where = "" if exc.msg.endswith(" at") else " at"  # "Unterminated string starting at" says it
        raise InputLineError(f"not JSON ({exc.msg}{where} column {exc.colno})") from None
    if not isinstance(fields, dict):
        raise InputLineError(f"expected a JSON object, got {_JSON_TYPES[type(fields)]}")
    return fields


def _checked_id(line_id: object, claim: Callable[[Id], bool]) -> Id:
    """The line's ``"id"``, if it is a string or an integer that no earlier line has."""
    if isinstance(line_id, bool) or not isinstance(line_id, str | int):
        raise InputLineError(f'"id" must be a string or an integer, not {_JSON_TYPES[type(line_id)]}')
    if not claim(line_id):
        raise InputLineError(f'duplicate "id" {json.dumps(line_id)}: an earlier line has it')
    return line_id


def _prompt(fields: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    prompt = fields.pop("prompt", None)
    if not isinstance(prompt, str) or not prompt:
        raise InputLineError('"prompt" must be a non-empty string')
    return prompt, fields
