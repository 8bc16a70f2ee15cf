"""The batch command's output file: one JSON line per finished input, safe to resume after any kill.

Each result is appended as one ``os.write`` of a complete line to an ``O_APPEND`` descriptor, so a
kill (even SIGKILL) leaves at worst one partial last line. Opening the file again drops that partial
line and marks every index already there as done, in a bitmap: a bit per input, not a set of ints,
so memory stays in the kilobytes for hundreds of thousands of inputs. An exclusive ``flock`` keeps
a second run from writing the same file at the same time.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from typing import Any

__all__ = ["ResultFile"]


class _Bits:
    """A growable set of small non-negative ints, one bit each."""

    def __init__(self) -> None:
        self._bytes = bytearray()

    def __contains__(self, index: int) -> bool:
        byte = index >> 3
        return byte < len(self._bytes) and bool(self._bytes[byte] & (1 << (index & 7)))

    def add(self, index: int) -> None:
        byte = index >> 3
        if byte >= len(self._bytes):
            self._bytes.extend(bytes(max(byte + 1, 2 * len(self._bytes)) - len(self._bytes)))
        self._bytes[byte] |= 1 << (index & 7)


class ResultFile:
    """Results already written (``done``, ``failed``) and an appender for new ones (``write``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._done = _Bits()
        self._failed = _Bits()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._lock()
            self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _lock(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OSError(f"{self.path} is being written by another batch") from None

    def _load(self) -> None:
        kept = 0  # bytes of complete lines
        with open(self._fd, "rb", closefd=False) as existing:
            for number, line in enumerate(existing, 1):
                if not line.endswith(b"\n"):
                    break  # a write cut short by a kill: drop it and redo that input
                kept += len(line)
                index, failed = _parse(line)
                if index is None:
                    print(f"{self.path}:{number}: not a result line; ignored", file=sys.stderr)
                    continue
                self._done.add(index)
                if failed:
                    self._failed.add(index)
        os.ftruncate(self._fd, kept)

    def done(self, index: int) -> bool:
        """Whether the output already holds a result for input ``index``."""
        return index in self._done

    def failed(self, index: int) -> bool:
        """Whether the result the output holds for input ``index`` is an error."""
        return index in self._failed

    def write(self, result: dict[str, Any]) -> None:
        """Append one result (``{"index": ..., ...}``) as a single complete line."""
        line = (json.dumps(result, ensure_ascii=False) + "\n").encode()
        written = os.write(self._fd, line)
        while written < len(line):  # a short write (disk full, signal): finish the same line
            written += os.write(self._fd, line[written:])
        self._done.add(result["index"])
        if "error" in result:
            self._failed.add(result["index"])

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> ResultFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _parse(line: bytes) -> tuple[int | None, bool]:
    """The index of a result line and whether it is an error; ``(None, False)`` for anything else."""
    try:
        result = json.loads(line)
    except ValueError:
        return None, False
    index = result.get("index") if isinstance(result, dict) else None
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None, False
    return index, "error" in result
