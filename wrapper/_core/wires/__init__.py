"""How each API's endpoint is spoken, through its generated client: one wire per API (``scale``,
``gradient``), each with the ``Wire`` interface the clients use, and ``RULES``, its keywords' checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx
    from httpx_sse import ServerSentEvent

    from wrapper._generated.exceptions import APIStatusError

    from ..results import Completion, CompletionChunk, ResponseHeaders

__all__ = ["StreamingWire", "Wire"]


class Wire(Protocol):
    """How one API's endpoint is spoken, in terms of its generated client."""

    def request(self, model: str, prompt: str, params: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The generated request builder's kwargs for a call; ``ValueError`` for what the spec forbids."""
        ...

    def parse(self, content: bytes, headers: ResponseHeaders) -> Completion:
        """The result in a successful response's body; ``Malformed`` if it is not what the spec promises."""
        ...

    def status_error(self, response: httpx.Response) -> APIStatusError:
        """The typed error for an error response (its body already read)."""
        ...


class StreamingWire(Wire, Protocol):
    """The wire of an API that streams (``Api.streams``): it reads each server-sent event too."""

    def chunk(
        self, event: ServerSentEvent, response: httpx.Response, headers: ResponseHeaders
    ) -> CompletionChunk | None:
        """The chunk one stream event carries (None for an empty one); an error event raises its error."""
        ...
