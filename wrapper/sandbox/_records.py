"""What the sandbox keeps of the requests it serves: their counts (``Stats``), their exchanges
(``Sandbox(record=True)``), and the request log's line for each."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ._faults import Fault

REDACTED = "<redacted>"
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})


@dataclass(frozen=True)
class Stats:
    """Requests to the vendor routes since the last reset: served, in flight now, most in flight at once,
    and answered 429 by the rate limiter (``Sandbox(rpm=..., tpm=...)``; injected faults not counted).
    A request that began before the reset counts in none of them, even while it is still being answered."""

    requests: int
    in_flight: int
    max_in_flight: int
    rate_limited: int = 0


@dataclass
class Exchange:
    """One request to a vendor route and what the sandbox did with it; ``Sandbox(record=True)`` keeps them
    all in ``Sandbox.exchanges``, in the order the requests arrived."""

    method: str
    path: str
    request_headers: dict[str, str] = field(default_factory=dict)
    """The request's headers, credentials (``authorization``, ``x-api-key``, ...) redacted."""
    request_body: bytes = b""
    """The request's body as received."""
    status: int | None = None
    """The status answered; None when no answer was sent (a ``reset`` fault, or the client left first)."""
    headers: dict[str, str] = field(default_factory=dict)
    """The response's headers (``x-request-id`` included)."""
    body: bytes = b""
    """The response's body as sent: a stream's events up to where it ended or was cut."""
    fault: Fault | None = None
    """The fault injected into it (None: none)."""
    aborted: bool = False
    """True when the exchange broke off: a fault aborted the connection, or the client left before the end
    of the answer (mid-stream, during a ``delay``); nothing was sent after that."""
    request_id: str | None = None
    """The ``x-request-id`` the sandbox gave its answer (``sandbox-1``, ``sandbox-2``, ...)."""
    duration: float | None = None
    """Seconds from the request's arrival to the end of the exchange (None while it goes on)."""

    def log_line(self) -> str:
        """The request log's line: method, path, status (``-``: none sent), ``aborted`` when it broke off,
        seconds, the fault, and the request id, e.g.
        ``POST /v4/models/m/completions 503 0.004s fault=status=503;retry-after=1 id=sandbox-3``."""
        parts = [self.method, self.path, "-" if self.status is None else str(self.status)]
        if self.aborted:
            parts.append("aborted")
        parts.append(f"{self.duration or 0.0:.3f}s")
        if self.fault is not None:
            parts.append(f"fault={self.fault}")
        if self.request_id is not None:
            parts.append(f"id={self.request_id}")
        return " ".join(parts)


def redacted(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """An ASGI scope's ``headers`` as a dict, the credentials' values redacted."""
    named = ((name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in headers)
    return {name: REDACTED if name in _CREDENTIAL_HEADERS else value for name, value in named}


class Counter:
    """Counts vendor-route requests; one stays in flight until its last body byte is handed to the server.

    ``reset`` starts a new count: requests that entered before it leave without changing the new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation = 0
        self.requests = self.in_flight = self.max_in_flight = self.rate_limited = 0

    def enter(self) -> int:
        """Count a request in; the number to give ``leave``."""
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self._generation

    def leave(self, generation: int) -> None:
        """Count a request out (``generation``: what its ``enter`` returned)."""
        with self._lock:
            if generation == self._generation:
                self.in_flight -= 1

    def limited(self) -> None:
        with self._lock:
            self.rate_limited += 1

    def snapshot(self) -> Stats:
        with self._lock:
            return Stats(self.requests, self.in_flight, self.max_in_flight, self.rate_limited)

    def reset(self) -> None:
        with self._lock:
            self._generation += 1
            self.requests = self.in_flight = self.max_in_flight = self.rate_limited = 0
