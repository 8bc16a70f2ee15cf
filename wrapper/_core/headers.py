"""A response's headers as results carry them: ``ResponseHeaders``, built only when first read."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

__all__ = ["ResponseHeaders"]


class ResponseHeaders(Mapping[str, str]):
    """A response's headers: read-only, case-insensitive (repeated names joined with ", ", as httpx does).

    Built from the raw ``(name, value)`` byte pairs the transport gave, and only when first read:
    most callers never look, and the fast lane should not pay for them.
    """

    __slots__ = ("_map", "_raw")

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        self._map: dict[str, str] | None = None

    def _items(self) -> dict[str, str]:
        if self._map is None:
            items: dict[str, str] = {}
            for name, value in self._raw:
                key, text = _decode(name).lower(), _decode(value)
                items[key] = f"{items[key]}, {text}" if key in items else text
            self._map = items
        return self._map

    def __getitem__(self, name: str) -> str:
        return self._items()[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items()

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return f"ResponseHeaders({self._items()!r})"


def _decode(value: bytes) -> str:
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        return value.decode("latin-1")
