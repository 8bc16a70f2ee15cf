"""What the cache keeps for a key: an ``Entry``, a finished completion or a finished stream's chunks.

An entry is stored as bytes: a CRC-32 of the rest, then JSON holding the key it was stored under, its
kind and its results as ``to_dict()`` gives them. Reading checks all three, so a damaged file, a value
under the wrong key (a store that mixed up two replies) or another program's data is a miss, never
another request's answer. A stream is recorded as it is read (``Recording``) and becomes an entry only
once it has ended complete.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from wrapper import Completion, CompletionChunk

__all__ = ["CorruptEntry", "Entry", "Recording"]

Kind = Literal["complete", "stream"]
_KINDS = ("complete", "stream")
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # made once, as in _key


class CorruptEntry(ValueError):
    """Stored bytes that are not an entry of this key (damaged, another key's, another program's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """A finished call's results: one completion (``complete``) or a stream's chunks (``stream``), each as
    its ``to_dict()``."""

    kind: Kind
    results: tuple[Mapping[str, Any], ...]

    @classmethod
    def of_completion(cls, completion: Completion) -> Entry:
        return cls("complete", (_kept(completion),))

    def completion(self) -> Completion:
        """The stored completion, ``cached`` (a stream's chunks joined, if it is a stream's);
        ``CorruptEntry`` if it does not read back."""
        from wrapper import Completion

        data = self.results[-1]
        if self.kind == "stream":
            data = {**data, "text": "".join(_text(result) for result in self.results)}
        return _read(Completion, data)

    def chunks(self) -> list[CompletionChunk]:
        """The stored chunks, ``cached``, in order (a completion's: one); ``CorruptEntry`` if they do not
        read back."""
        from wrapper import CompletionChunk

        return [_read(CompletionChunk, data) for data in self.results]

    def encode(self, key: str) -> bytes:
        """The bytes to store under ``key``."""
        document = {"key": key, "kind": self.kind, "results": list(self.results)}
        text = _compact(document).encode()
        return b"%08x" % zlib.crc32(text) + text

    @classmethod
    def decode(cls, key: str, data: bytes) -> Entry:
        """The entry stored under ``key``; ``CorruptEntry`` saying why ``data`` is not one."""
        text = data[8:]
        try:
            crc = int(data[:8], 16)
        except ValueError:
            raise CorruptEntry("it does not start with a checksum") from None
        if zlib.crc32(text) != crc:
            raise CorruptEntry("its checksum does not match (the stored bytes changed)")
        try:
            document = json.loads(text.decode())  # UTF-8, as encode wrote it: not guessed
        except ValueError as exc:
            raise CorruptEntry(f"it is not JSON ({exc})") from None
        if not isinstance(document, dict) or document.get("key") != key:
            raise CorruptEntry("it was stored under another key")
        kind, results = document.get("kind"), document.get("results")
        if kind not in _KINDS or not isinstance(results, list) or not results:
            raise CorruptEntry("it has no kind or no results")
        if not all(isinstance(result, dict) for result in results):
            raise CorruptEntry("its results are not objects")
        return cls(kind, tuple(results))


R = TypeVar("R", "Completion", "CompletionChunk")


def _kept(result: Completion | CompletionChunk) -> dict[str, Any]:
    """A result as an entry keeps it: not a route's (a routed hit names its own) nor a hit."""
    data = result.to_dict()  # a new dict: changed in place
    data["route"], data["cached"] = None, False
    return data


def _text(data: Mapping[str, Any]) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise CorruptEntry("a chunk has no text")
    return text


def _read(cls: type[R], data: Mapping[str, Any]) -> R:
    try:
        return cls.from_dict({**data, "cached": True})
    except ValueError as exc:
        raise CorruptEntry(str(exc)) from None


class Recording:
    """A stream's chunks as they are read; ``entry()`` once it has ended complete (never before)."""

    __slots__ = ("_chunks",)

    def __init__(self) -> None:
        self._chunks: list[CompletionChunk] = []

    def add(self, chunk: CompletionChunk) -> None:
        """Record ``chunk``."""
        self._chunks.append(chunk)

    def __bool__(self) -> bool:
        return bool(self._chunks)

    def entry(self) -> Entry:
        """The finished stream's entry (its chunks' ``to_dict()``, built now, not while it streamed)."""
        if not self._chunks:
            raise ValueError("a stream with no chunk is not an answer to keep")
        return Entry("stream", tuple(_kept(chunk) for chunk in self._chunks))
