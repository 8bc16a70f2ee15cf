"""What keeps a misbehaving client from harming the sandbox: a cap and a deadline on request bodies, and
credentials compared in constant time. (Slow and idle connections are closed by ``_server``.)"""

from __future__ import annotations

import asyncio
import hmac

from starlette.requests import Request

MAX_BODY = 1024 * 1024
"""The largest request body the sandbox reads by default, in bytes (1 MiB: a prompt far over any of its
models' contexts still fits)."""
CLIENT_TIMEOUT = 10.0
"""Seconds a client has by default to send a request's head, then its body, before the sandbox gives up."""


class BodyRefused(Exception):
    """The body was not read whole: ``status`` 413 (over the cap) or 408 (too slow), why, and the ``headers``
    of the answer.

    After a 413 the connection stays open while the client sends the rest, which the server drops unread
    (closing it with bytes unread would reset it, and the client could lose the 413); ``_server`` closes it
    if that takes over ``client_timeout``. A 408 closes it at once: the client has stopped sending.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.headers = {"connection": "close"} if status == 408 else {}


async def read_body(request: Request, max_body: int, seconds: float) -> bytes:
    """``request``'s body, or ``BodyRefused``: 413 before reading past ``max_body`` bytes (at once when its
    ``Content-Length`` says it is larger), 408 when it is not whole ``seconds`` after the head."""
    raise_it = "raise it with --max-body BYTES (Sandbox(max_body=...))"
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body:  # h11 has checked it is one number
        over = f"Request body of {declared} bytes is over the sandbox's limit of {max_body}"
        raise BodyRefused(413, f"{over}: {raise_it}")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body:
                    over = f"Request body is over the sandbox's limit of {max_body} bytes"
                    raise BodyRefused(413, f"{over}: {raise_it}")
                chunks.append(chunk)
    except TimeoutError:
        late = f"Request body incomplete {seconds:g} s after its head (received {size} bytes)"
        raise BodyRefused(408, late) from None
    return b"".join(chunks)


def same(sent: str, accepted: str) -> bool:
    """Whether the credential ``sent`` is ``accepted``, in a time that tells nothing of how much matched."""
    encoded = (text.encode("utf-8", "surrogatepass") for text in (sent, accepted))
    return hmac.compare_digest(*encoded)
