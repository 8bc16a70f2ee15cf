"""The batch command's output file: its run record, then one JSON line per finished input and target,
safe to resume after any kill.

The file's first line is the run's record (``wrapper._cli._record``); a resume compares it with its own
and refuses another run's file, naming the difference, unless told to allow it (its record is then
appended). A file that is not a results file (a line that is neither a result nor a record) is refused
before anything is written to it; a symlink is followed, and stays a link.

Each result is appended as one ``os.write`` of a complete line to an ``O_APPEND`` descriptor, so a
kill (even SIGKILL) leaves at worst one partial last line. Opening the file again drops that partial
line and notes which inputs are done, per target: by ``"id"`` for results that have one, else by
``"index"`` (``wrapper.batch.result_key``), each with the first 32 bits of its request's fingerprint. A
result is its input's only if the fingerprints agree: a line whose request changed is sent again, and
its new result replaces the old. A line with an id that no result has yet owns the id-less result at
its index, if there is one: that is the result it got before it had a (valid) id, so giving a line an
id never earns it a second one. Indices go in bitmaps and an array (a bit each, and 4 bytes of
fingerprint); ids go in a dict, about 100 bytes per id. An exclusive ``flock`` keeps a second run from
writing the same file at the same time.

A result that was replaced is dropped by a rewrite (at opening, or once the run is over), and so are
the failed results for ``--retry-failed`` (``drop_failures``): into a temporary file created
exclusively beside the file (``tempfile.mkstemp``), locked, fsynced, then renamed over it, so a kill at
any point leaves either the old file or the new one, whole.

``StandardOutput`` (the output ``-``) writes the same lines to standard output and reads nothing back:
there is nothing to resume from, so each run sends every input.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import sys
import tempfile
from array import array
from collections.abc import Callable, Mapping
from typing import Any

from wrapper.batch import RUN, ResultTotals, result_key

from ._inputs import Id
from ._record import Run, fingerprint_bits

__all__ = ["OutputError", "ResultFile", "StandardOutput"]


class OutputError(ValueError):
    """An output the batch may not write to: not a results file, or another run's."""


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

    def discard(self, index: int) -> None:
        byte = index >> 3
        if byte < len(self._bytes):
            self._bytes[byte] &= ~(1 << (index & 7)) & 0xFF


class _Done:
    """One target's results: by id, and by index for those without one; each with its fingerprint's bits
    and whether it failed."""

    def __init__(self) -> None:
        self._ids: dict[Id, int] = {}  # fingerprint bits << 1 | failed
        self._indices = _Bits()
        self._failed = _Bits()
        self._bits = array("I")

    def has(self, kind: str, value: Id) -> bool:
        if kind == "id":
            return value in self._ids
        assert isinstance(value, int)
        return value in self._indices

    def add(self, kind: str, value: Id, bits: int, failed: bool) -> None:
        if kind == "id":
            self._ids[value] = bits << 1 | failed
            return
        assert isinstance(value, int)
        self._indices.add(value)
        (self._failed.add if failed else self._failed.discard)(value)
        if value >= len(self._bits):
            self._bits.frombytes(bytes(4 * (max(value + 1, 2 * len(self._bits)) - len(self._bits))))
        self._bits[value] = bits

    def drop_index(self, index: int) -> None:
        self._indices.discard(index)

    def find(self, index: int, line_id: Id | None) -> tuple[int, bool] | None:
        """The fingerprint bits of the result of the input at ``index`` with ``line_id`` (its id's, else
        the id-less one at its index) and whether it failed; None if it has none."""
        if line_id is not None and (value := self._ids.get(line_id)) is not None:
            return value >> 1, bool(value & 1)
        if index in self._indices:
            return self._bits[index], index in self._failed
        return None


class ResultFile:
    """Results already written (``done``, ``failed``, ``totals``) and an appender for new ones (``write``).

    ``run`` is the batch's: its record is compared with the file's, and its targets are what results are
    kept for. A difference is an ``OutputError`` naming it unless ``allow_changes``, and so is a file
    whose content is not results; either is refused before anything is written.
    """

    def __init__(self, path: str, run: Run, *, allow_changes: bool = False) -> None:
        self.path = path
        self.run = run
        self.totals = ResultTotals()
        self._claimed: set[Id] = set()
        self._replaced = False  # a result written by this run replaced one: rewrite the file at the end
        self._fd = _open_locked(path)
        try:
            record, kept = self._load()
            differences = self._differences(record)
            if differences and self.totals.results and not allow_changes:
                raise OutputError(
                    f"{path} holds the results of another run ({'; '.join(differences)}): write this run's "
                    "to another file, or pass --allow-changed-settings to add them to it (a result whose "
                    "request changed is then sent again, and replaces it)"
                )
            os.ftruncate(self._fd, kept)  # a line cut short by a kill is redone
            if differences or record is None:
                self._append(self.run.record())
            if self._stale:
                self._rewrite(lambda line: True)
        except BaseException:
            os.close(self._fd)
            raise

    def _differences(self, record: Mapping[str, Any] | None) -> list[str]:
        """How the run that wrote the file differs from this one (a file without results is refused for
        none: it has nothing to mix up, and gets this run's record)."""
        if record is None:
            return (
                ["it records no run: it was written before results files did"] if self.totals.results else []
            )
        return self.run.differences(record)

    def _load(self) -> tuple[Mapping[str, Any] | None, int]:
        """Read the file: its last run record (None: none) and the bytes of its complete lines."""
        self._done: dict[str | None, _Done] = {}
        self._stale: dict[tuple[Any, ...], int] = {}  # a replaced result's key -> the line that replaced it
        self.totals = ResultTotals()
        self._lines = 0
        record: Mapping[str, Any] | None = None
        kept = 0
        with open(self._fd, "rb", closefd=False) as existing:
            existing.seek(0)
            for line in existing:
                if not line.endswith(b"\n"):
                    if not self._lines:
                        raise self._not_results(1, "is not a result line nor a run record")
                    break  # a write cut short by a kill: dropped, and that input redone
                self._lines += 1
                kept += len(line)
                parsed = _parsed(line)
                if isinstance(parsed, dict) and list(parsed) == [RUN]:
                    record = parsed[RUN]
                    continue
                key = result_key(parsed) if isinstance(parsed, dict) else None
                if key is None:
                    raise self._not_results(self._lines, "is not a result line nor a run record")
                self._add(key, parsed)
        return record, kept

    def _not_results(self, number: int, why: str) -> OutputError:
        return OutputError(
            f"{self.path} is not a results file (its line {number} {why}): the results must go to a file of "
            "their own, new or written by this command; nothing was written to it"
        )

    def _add(self, key: tuple[Any, ...], result: Mapping[str, Any]) -> None:
        """Note one result line (the ``self._lines``-th), which replaces its input's earlier one, if any."""
        target, kind, value = key
        done = self._done.setdefault(target, _Done())
        if done.has(kind, value):
            self._stale[key] = self._lines
        if kind == "id" and done.has("index", result["index"]):  # its line's result from before its id
            self._stale[(target, "index", result["index"])] = self._lines
            done.drop_index(result["index"])
        done.add(kind, value, fingerprint_bits(result.get("fingerprint")), result.get("error") is not None)
        self.totals.add(result)

    def done(self, target: str | None, index: int, line_id: Id | None, fingerprint: str) -> bool:
        """Whether the output holds the result of this request: the input at ``index`` with ``line_id``
        (None: none), its fingerprint the same (a result without one is anybody's)."""
        found = self._done.get(target, _NONE).find(index, line_id)
        return found is not None and found[0] in (0, fingerprint_bits(fingerprint))

    def failed(self, target: str | None, index: int, line_id: Id | None) -> bool:
        """Whether the result the output holds for that input is an error."""
        found = self._done.get(target, _NONE).find(index, line_id)
        return found is not None and found[1]

    def claim(self, line_id: Id) -> bool:
        """Note that an input line has this id; False if an earlier one already had it."""
        first = line_id not in self._claimed
        self._claimed.add(line_id)
        return first

    def write(self, result: dict[str, Any]) -> None:
        """Append one result line (``{"index": ..., ["id": ...,] ...}``) as a single complete line."""
        key = result_key(result)
        assert key is not None
        self._append(result)
        stale = len(self._stale)
        self._add(key, result)
        self._replaced = self._replaced or len(self._stale) > stale

    def _append(self, line: Mapping[str, Any]) -> None:
        data = _line(line)
        written = os.write(self._fd, data)
        while written < len(data):  # a short write (disk full, signal): finish the same line
            written += os.write(self._fd, data[written:])
        self._lines += 1

    def drop_failures(self) -> int:
        """Rewrite the file without its error results (nor those replaced); return how many errors went.

        Their inputs are then no longer done, so the run sends them again.
        """
        failed = self.totals.failed
        self._rewrite(lambda line: line.get("error") is None)
        return failed - self.totals.failed

    def _rewrite(self, keep: Callable[[Mapping[str, Any]], bool]) -> None:
        """Rewrite the file with its run records and the current results that ``keep`` keeps."""
        real = os.path.realpath(self.path)  # a symlink stays one: its target is replaced
        directory, name = os.path.split(real)
        fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".rewrite", dir=directory)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # before the rename: the new file is never unlocked
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
            with open(self._fd, "rb", closefd=False) as old, open(fd, "wb", closefd=False) as new:
                old.seek(0)
                for number, line in enumerate(old, 1):  # _load left only complete lines
                    parsed = _parsed(line)
                    key = result_key(parsed) if isinstance(parsed, dict) else None
                    if key is None or (self._stale.get(key, 0) <= number and keep(parsed)):
                        new.write(line)
            os.fchmod(fd, stat.S_IMODE(os.fstat(self._fd).st_mode))
            os.fsync(fd)
            os.replace(temporary, real)
        except BaseException:
            os.close(fd)
            os.unlink(temporary)
            raise
        _fsync_directory(directory)
        os.close(self._fd)
        self._fd = fd
        self._load()

    def close(self) -> None:
        """Rewrite the file without the results this run replaced, and close it."""
        try:
            if self._replaced:
                self._rewrite(lambda line: True)
        finally:
            os.close(self._fd)

    def __enter__(self) -> ResultFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_NONE = _Done()


class StandardOutput:
    """Results written to standard output as they finish, one line each, and never read back: no input
    is done before the run, so it sends every one (duplicate ids are still found)."""

    def __init__(self) -> None:
        self._ids: set[Id] = set()
        self.totals = ResultTotals()

    def done(self, target: str | None, index: int, line_id: Id | None, fingerprint: str) -> bool:
        return False

    def failed(self, target: str | None, index: int, line_id: Id | None) -> bool:
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
        self.totals.add(result)

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


def _line(result: Mapping[str, Any]) -> bytes:
    """A result as one line of UTF-8 JSON."""
    return (json.dumps(result, ensure_ascii=False) + "\n").encode()


def _parsed(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _open_locked(path: str) -> int:
    """A descriptor of ``path``, a regular file (created if need be; a symlink's target), holding its
    exclusive lock.

    If the lock was won on a file that a rewrite has meanwhile renamed over, try the new one.
    """
    while True:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                raise OutputError(
                    f"{path} is not a regular file: the results go to a file (-o - for standard output)"
                )
        except FileNotFoundError:
            pass  # created below (through a dangling symlink, at its target)
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
