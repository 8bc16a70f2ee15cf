"""The batch command's output file: one JSON line per finished input, safe to resume after any kill.

Each result is appended as one ``os.write`` of a complete line to an ``O_APPEND`` descriptor, so a
kill (even SIGKILL) leaves at worst one partial last line. Opening the file again drops that partial
line and notes which inputs are done: by ``"id"`` for results that have one, else by ``"index"``.
A line with an id that no result has yet owns the id-less result at its index, if there is one: that
is the result it got before it had a (valid) id, so giving a line an id never earns it a second one.
Indices go in a bitmap (a bit per input, so kilobytes for hundreds of thousands); ids go in a dict
(about 100 bytes per id, so ~100 MB for a million), which also remembers the ids the run's input
has claimed, to find duplicates without a second table. An exclusive ``flock`` keeps a second run
from writing the same file at the same time.

``drop_failures`` (``--retry-failed``) rewrites the file without its error results: into a locked
temporary file beside it, fsynced, then renamed over it, so a kill at any point leaves either the old
file or the new one, whole.

``StandardOutput`` (the output ``-``) writes the same lines to standard output and reads nothing back:
there is nothing to resume from, so each run sends every input.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
from typing import Any

from wrapper._cli._inputs import Id

__all__ = ["ResultFile", "StandardOutput"]

_DONE, _FAILED, _CLAIMED = 1, 2, 4  # flags of an id


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


class _Finished:
    """Which inputs have a result (and which of those failed), keyed by id, or by index without one."""

    def __init__(self) -> None:
        self._done = _Bits()
        self._failed = _Bits()
        self._ids: dict[Id, int] = {}

    def add(self, index: int, line_id: Id | None, failed: bool) -> None:
        if line_id is not None:
            self._ids[line_id] = self._ids.get(line_id, 0) | _DONE | (_FAILED if failed else 0)
            return
        self._done.add(index)
        if failed:
            self._failed.add(index)

    def holds(self, index: int, line_id: Id | None) -> bool:
        """Whether a result keyed exactly so (by this id, or by this index without an id) is here."""
        return bool(self._ids.get(line_id, 0) & _DONE) if line_id is not None else index in self._done

    def done(self, index: int, line_id: Id | None) -> bool:
        """Whether the line at ``index`` with ``line_id`` has a result: its id's, else its index's."""
        return self.holds(index, line_id) or index in self._done

    def failed(self, index: int, line_id: Id | None) -> bool:
        if line_id is not None and self.holds(index, line_id):
            return bool(self._ids[line_id] & _FAILED)
        return index in self._failed

    def claim(self, line_id: Id) -> bool:
        flags = self._ids.get(line_id, 0)
        self._ids[line_id] = flags | _CLAIMED
        return not flags & _CLAIMED


class ResultFile:
    """Results already written (``done``, ``failed``) and an appender for new ones (``write``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._finished = _Finished()
        self._fd = _open_locked(path)
        try:
            self._load()
        except BaseException:
            os.close(self._fd)
            raise

    def _load(self) -> None:
        kept = 0  # bytes of complete lines
        with open(self._fd, "rb", closefd=False) as existing:
            for number, line in enumerate(existing, 1):
                if not line.endswith(b"\n"):
                    break  # a write cut short by a kill: drop it and redo that input
                kept += len(line)
                key = _parse(line)
                if key is None:
                    print(f"{self.path}:{number}: not a result line; ignored", file=sys.stderr)
                    continue
                self._finished.add(*key)
        os.ftruncate(self._fd, kept)

    def done(self, index: int, line_id: Id | None = None) -> bool:
        """Whether the output already holds a result for the input with this id (None: none) at this
        index: the id's result, or else the id-less one at that index."""
        return self._finished.done(index, line_id)

    def failed(self, index: int, line_id: Id | None = None) -> bool:
        """Whether the result the output holds for that input is an error."""
        return self._finished.failed(index, line_id)

    def claim(self, line_id: Id) -> bool:
        """Note that an input line has this id; False if an earlier one already had it."""
        return self._finished.claim(line_id)

    def write(self, result: dict[str, Any]) -> None:
        """Append one result (``{"index": ..., ["id": ...,] ...}``) as a single complete line."""
        line = _line(result)
        written = os.write(self._fd, line)
        while written < len(line):  # a short write (disk full, signal): finish the same line
            written += os.write(self._fd, line[written:])
        self._finished.add(result["index"], result.get("id"), "error" in result)

    def drop_failures(self) -> int:
        """Rewrite the file without its error results (nor repeats of a result); return how many went.

        Their inputs are then no longer done, so the run re-sends them.
        """
        directory, name = os.path.split(self.path)
        temporary = os.path.join(directory, f".{name}.rewrite")
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # before the rename: the new file is never unlocked
            kept, dropped = _Finished(), 0
            with open(self._fd, "rb", closefd=False) as old, open(fd, "wb", closefd=False) as new:
                old.seek(0)
                for line in old:  # _load left only complete lines
                    key = _parse(line)
                    if key is not None:
                        index, line_id, failed = key
                        if failed or kept.holds(index, line_id):
                            dropped += 1
                            continue
                        kept.add(index, line_id, failed)
                    new.write(line)  # results, and lines that are not results, kept as they are
            os.fchmod(fd, stat.S_IMODE(os.fstat(self._fd).st_mode))
            os.fsync(fd)
            os.replace(temporary, self.path)
        except BaseException:
            os.close(fd)
            os.unlink(temporary)
            raise
        _fsync_directory(directory)
        os.close(self._fd)
        self._fd, self._finished = fd, kept
        return dropped

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> ResultFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class StandardOutput:
    """Results written to standard output as they finish, one line each, and never read back: no input
    is done before the run, so it sends every one (duplicate ids are still found)."""

    def __init__(self) -> None:
        self._ids: set[Id] = set()

    def done(self, index: int, line_id: Id | None = None) -> bool:
        return False

    def failed(self, index: int, line_id: Id | None = None) -> bool:
        return False

    def claim(self, line_id: Id) -> bool:
        """Note that an input line has this id; False if an earlier one already had it."""
        first = line_id not in self._ids
        self._ids.add(line_id)
        return first

    def write(self, result: dict[str, Any]) -> None:
        """Print one result line, flushed at once for whatever reads the other end."""
        sys.stdout.buffer.write(_line(result))
        sys.stdout.buffer.flush()

    def drop_failures(self) -> int:
        """Refused: standard output keeps no results to rewrite."""
        raise ValueError(
            "--retry-failed needs an output file to rewrite: -o - (standard output) keeps no results"
        )

    def close(self) -> None:
        pass

    def __enter__(self) -> StandardOutput:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass


def _line(result: dict[str, Any]) -> bytes:
    """A result as one line of UTF-8 JSON."""
    return (json.dumps(result, ensure_ascii=False) + "\n").encode()


def _open_locked(path: str) -> int:
    """A descriptor of ``path`` (created if need be) holding its exclusive lock.

    If the lock was won on a file that ``drop_failures`` has meanwhile renamed over, try the new one.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OSError(f"{path} is being written by another batch") from None
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            return fd
        os.close(fd)


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable."""
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _parse(line: bytes) -> tuple[int, Id | None, bool] | None:
    """A result line's index, id (None if it has none) and whether it is an error; None if not a result."""
    try:
        result = json.loads(line)
    except ValueError:
        return None
    if not isinstance(result, dict):
        return None
    index, line_id = result.get("index"), result.get("id")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        return None
    if isinstance(line_id, bool) or not isinstance(line_id, (str, int, type(None))):
        return None
    return index, line_id, "error" in result
