"""Switches for the tests of code that uses the clients: ``set_testing(True)`` skips retry waits.

Retries are still made and logged, with the delay they would have waited.
"""

from __future__ import annotations

__all__ = ["is_testing", "set_testing"]

_testing = False


def set_testing(enabled: bool) -> None:
    """Turn testing mode on (retry waits are skipped) or off."""
    global _testing
    _testing = bool(enabled)


def is_testing() -> bool:
    """True while testing mode is on."""
    return _testing
