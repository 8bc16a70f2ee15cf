"""``CallHooks``: the one extension point of the clients, for what an extra adds to each call.

A hook factory, given in the ``hooks`` request option (of a client, ``with_options`` or a call), is
called once per call with its ``CallInfo`` and returns the call's ``CallHooks`` (or None: nothing to
add). The client's attempt loop then calls them around each attempt. The batch paces and counts its
prompts this way, the telemetry traces each call, a router's routes pace themselves and keep their
health (``routing``: where each attempt goes), and so can your own code: count attempts, keep a shared
rate limit, log each retry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from wrapper._generated.exceptions import APIError

    from .results import Completion, CompletionChunk

__all__ = ["FORGIVEN_429S", "CallHooks", "CallInfo", "HookFactory"]

FORGIVEN_429S = 10
"""At most this many of a call's failures that its hooks forgave cost no retry (a pacer's 429s, say)."""


@dataclasses.dataclass(frozen=True, slots=True)
class CallInfo:
    """One call as its hooks see it: the client (``client.API`` is its API's descriptor), the model, the
    prompt, the request's parameters (the keyword arguments but the request options), whether it
    streams, the route that sent it (``wrapper.router``; None for a call made on the client), and when
    its deadline passes, on ``time.monotonic()``'s clock (None: no deadline). A hook that waits (for a
    turn of a rate limit, say) waits no later than the deadline: the call then ends with its timeout."""

    client: Any
    model: str
    prompt: str
    params: Mapping[str, Any]
    stream: bool
    route: str | None = None
    deadline: float | None = None
    options: Any = None
    """The options in force for the call (``wrapper.Options``: the client's, with the call's on top)."""


@dataclasses.dataclass(eq=False, repr=False)
class CallHooks:
    """What an extra adds to one call: override the hooks you need (each does nothing here).

    In order: ``answer(url, body)`` once, before any attempt (an answer given there, a response cache's,
    is the call's: no attempt is made, and every hook's ``answered(completion)`` is called instead of
    the attempts' hooks); ``before()`` before each attempt (wait for a turn here, or raise
    to end the call), then
    ``succeeded(completion)`` or ``failed(error)`` after it; ``retrying(error, retry, delay)`` when a
    failure is to be retried after ``delay`` seconds; ``chunk(chunk)`` for each chunk a stream yields;
    ``finished(error)`` once at the end, with the exception that ended the call (None when it
    completed, a ``GeneratorExit`` for a stream closed early). ``active()`` is a context the call runs
    in: all of a ``complete``, a stream's opening. Async clients call ``aanswer``, ``abefore``,
    ``asucceeded`` and ``afailed``, which may await and by default call the plain hooks.

    ``failed`` returning True retries the failure without spending one of ``max_retries`` (the batch
    does so for a 429 met at its own pace, whose limiter slows down for it), as long as the error is
    one the retry policy retries, the deadline allows, and the call's hooks have forgiven fewer than
    ``FORGIVEN_429S`` failures so far (after that, each failure costs a retry: none retries for ever).
    A call with ``max_retries=0`` is never retried.
    """

    call: CallInfo
    """The call these hooks are for."""

    def answer(self, url: str, body: bytes) -> Completion | Sequence[CompletionChunk] | None:
        """Before the first attempt (of a routed call: of each route's): the call's answer without
        sending the request (``url``, the JSON ``body``), as a response cache gives it (a stream's: its
        chunks), or None to send it. A completion given here is what the call returns; ``succeeded``
        and ``finished`` follow as after an attempt."""
        return None

    def answered(self, completion: Completion | None) -> None:
        """The call was answered without an attempt (a hook's ``answer``, a cache hit): its completion
        (None for a stream, whose chunks follow). ``before``, ``succeeded`` and ``failed`` are not called."""

    def before(self) -> None:
        """Before each attempt."""

    def succeeded(self, completion: Completion | None) -> None:
        """After the attempt that worked: its completion (None for a stream, whose chunks follow)."""

    def failed(self, error: APIError) -> bool:
        """After a failed attempt; True: retry it without counting it against ``max_retries``."""
        return False

    def retrying(self, error: APIError, retry: int, delay: float) -> None:
        """``error`` will be retried (retry number ``retry``) in ``delay`` seconds."""

    def chunk(self, chunk: CompletionChunk) -> None:
        """A stream's chunk, as it is handed to the caller."""

    def finished(self, error: BaseException | None) -> None:
        """The call is over: ``error`` is what ended it, None when it completed."""

    def active(self) -> AbstractContextManager[object]:
        """The context the call's attempts run in (a trace's current span, say)."""
        return nullcontext()

    async def aanswer(self, url: str, body: bytes) -> Completion | Sequence[CompletionChunk] | None:
        return self.answer(url, body)

    async def abefore(self) -> None:
        self.before()

    async def asucceeded(self, completion: Completion | None) -> None:
        self.succeeded(completion)

    async def afailed(self, error: APIError) -> bool:
        return self.failed(error)


HookFactory: TypeAlias = Callable[[CallInfo], CallHooks | None]
"""What the ``hooks`` option holds: called with each call's ``CallInfo`` (a ``CallHooks`` subclass is one).
A factory that is false when a call starts (``bool(factory)``) is not called for it: telemetry's is
while no provider is set, so an untraced call builds no ``CallInfo``."""
