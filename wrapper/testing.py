"""Switches for your own tests: ``set_testing(True)`` makes retries wait for nothing.

With testing on, a retried call is still retried, and still logs ``retrying ... in 1.23s`` at INFO
with the delay it would have waited, but it does not wait (as stamina's ``set_testing``).
"""

from __future__ import annotations

__all__ = ["is_testing", "set_testing"]

_testing = False


def set_testing(enabled: bool) -> None:
    """Turn testing mode on (retry waits are skipped) or off (they are slept, the default)."""
    global _testing
    _testing = bool(enabled)


def is_testing() -> bool:
    """True while testing mode is on."""
    return _testing
