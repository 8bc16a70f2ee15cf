"""Where each attempt of a call goes: ``Routing``, the attempt policy's extension that a router gives.

A call made on a client sends every attempt to that client. A ``Routing`` made for one call sends each
to the ``Target`` it picks (a client, a model, the request's parameters and options, a route's name),
and the attempt loop stays the clients' (``retries``): it owns the retry decision, Retry-After,
backoff, the deadline and the testing switch. A retried failure moves the call to the next target at
once, spending no retry; once every target has failed (``pick`` returns None: the pass is over), the
loop decides as for one client's failure, and the next pass begins. A pass whose failures the hooks
all forgave (429s each target's pacer slows down for) costs no retry and goes round again at once:
each target's pacer waits out its own pause. Each attempt on a target is one visit: the target's hook
factories make that attempt's hooks, their ``CallInfo.route`` set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .retries import Target

if TYPE_CHECKING:
    from wrapper._generated.exceptions import APIError

    from .options import Options
    from .results import Completion
    from .streams import AsyncCompletionStream, CompletionStream

__all__ = ["Routing", "Target"]


class Routing:
    """One call's choice of target for each attempt: subclass it, make one for each call, and run the
    call with ``complete``, ``stream`` (sync clients) or ``acomplete``, ``astream`` (async ones).

    ``options`` are the call's own: its ``max_retries`` (passes over the targets after the first), its
    retry policy and its deadline.
    """

    def __init__(self, options: Options) -> None:
        self.options = options

    def pick(self) -> tuple[Target, float] | None:
        """The next attempt's target and the seconds to wait before it is sent (a cooldown's end);
        None once every target was tried in this pass (the next ``pick`` begins another)."""
        raise NotImplementedError

    def exhausted(self, last: APIError, attempts: int) -> APIError:
        """What the call raises once its retries are spent: ``last``, the last failure, unless overridden."""
        return last

    def complete(self, prompt: str) -> Completion:
        """The call's completion (sync clients)."""
        from .sync_client import complete_routed

        return complete_routed(self, prompt)

    async def acomplete(self, prompt: str) -> Completion:
        """The call's completion (async clients)."""
        from .async_client import acomplete_routed

        return await acomplete_routed(self, prompt)

    def stream(self, prompt: str) -> CompletionStream:
        """The call's stream (sync clients): retried over the targets until its first chunk, never after."""
        from .sync_client import stream_routed

        return stream_routed(self, prompt)

    def astream(self, prompt: str) -> AsyncCompletionStream:
        """The call's stream (async clients)."""
        from .async_client import astream_routed

        return astream_routed(self, prompt)
