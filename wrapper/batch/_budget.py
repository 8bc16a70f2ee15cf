"""``Budget``: a cap on what a batch may spend, consulted as each prompt is about to be sent."""

from __future__ import annotations

import threading

__all__ = ["Budget"]


def _cap(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Budget: {name} must be an integer >= 0 (or None for no cap), got {value!r}")
    return value


def _spent(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Budget: {name} must be an integer >= 0, got {value!r}")
    return value


class Budget:
    """At most ``requests`` prompts sent and ``tokens`` tokens (prompt and response) for a run.

    A batch given it (``complete_many(..., budget=...)``) asks it as each prompt is about to be sent:
    a prompt whose estimated tokens (``estimate_tokens``: ``ceil(len(prompt) / 4)`` plus its max tokens)
    would take the tokens spent and those booked by the prompts in flight past ``tokens``, or that would
    be prompt number ``requests + 1``, is not sent, and the batch sends nothing more: ``reached`` is then
    True. The prompts in flight finish (their retries too); each success's reported tokens replace its
    estimate (an API that reports none, Gradient, keeps the estimate). So a batch goes past ``tokens``
    only by what the answers in flight used beyond their estimates, and never past ``requests``.

    ``spent_requests`` and ``spent_tokens`` are what was spent so far, counting those given to the
    constructor (what an earlier run spent, to resume it under the same cap). A budget outlives its
    batch: raise a cap (``budget.tokens = ...``) and run the prompts not sent with it to go on. Bad
    values raise ``ValueError`` naming the field.
    """

    def __init__(
        self,
        *,
        requests: int | None = None,
        tokens: int | None = None,
        spent_requests: int = 0,
        spent_tokens: int = 0,
    ) -> None:
        self._lock = threading.Lock()
        self._requests = _cap("requests", requests)
        self._tokens = _cap("tokens", tokens)
        self._spent_requests = _spent("spent_requests", spent_requests)
        self._spent_tokens = _spent("spent_tokens", spent_tokens)
        self._booked = 0  # the estimates of the prompts in flight
        self._reached = False

    @property
    def requests(self) -> int | None:
        """The cap on prompts sent (None: no cap)."""
        return self._requests

    @requests.setter
    def requests(self, value: int | None) -> None:
        with self._lock:
            self._requests = _cap("requests", value)
            self._reached = False

    @property
    def tokens(self) -> int | None:
        """The cap on tokens, prompt and response (None: no cap)."""
        return self._tokens

    @tokens.setter
    def tokens(self, value: int | None) -> None:
        with self._lock:
            self._tokens = _cap("tokens", value)
            self._reached = False

    @property
    def spent_requests(self) -> int:
        """Prompts sent (each once, whatever its retries)."""
        return self._spent_requests

    @property
    def spent_tokens(self) -> int:
        """Tokens the answers reported (their estimates for an API that reports none), those in flight
        not included."""
        return self._spent_tokens

    @property
    def reached(self) -> bool:
        """Whether a prompt was held back for the budget (since a cap was last set)."""
        return self._reached

    def admit(self, estimate: int) -> bool:
        """Whether a prompt of ``estimate`` tokens may be sent now; if so it is counted and booked."""
        with self._lock:
            over_requests = self._requests is not None and self._spent_requests >= self._requests
            over_tokens = (
                self._tokens is not None and self._spent_tokens + self._booked + estimate > self._tokens
            )
            if self._reached or over_requests or over_tokens:
                self._reached = True
                return False
            self._spent_requests += 1
            self._booked += estimate
            return True

    def settle(self, estimate: int, used: int) -> None:
        """A prompt admitted with ``estimate`` succeeded, using ``used`` tokens."""
        with self._lock:
            self._booked -= estimate
            self._spent_tokens += used

    def release(self, estimate: int) -> None:
        """A prompt admitted with ``estimate`` ended without an answer to count (it failed)."""
        with self._lock:
            self._booked -= estimate

    def __repr__(self) -> str:
        return (
            f"Budget(requests={self._requests}, tokens={self._tokens}, "
            f"spent_requests={self._spent_requests}, "
            f"spent_tokens={self._spent_tokens}, reached={self._reached})"
        )
