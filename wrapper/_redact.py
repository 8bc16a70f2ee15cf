"""Keeping credentials out of logs and exception messages."""

from __future__ import annotations

from collections.abc import Mapping

SENSITIVE_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
REDACTED = "<redacted>"
MIN_SECRET = 6


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with the value of every credential-bearing header replaced."""
    return {name: REDACTED if name.lower() in SENSITIVE_HEADERS else value for name, value in headers.items()}


def scrub(text: str, headers: Mapping[str, str]) -> str:
    """``text`` with every credential sent in ``headers`` (a bearer token on its own, too) replaced.

    Values shorter than ``MIN_SECRET`` are left alone: no real credential is that short, and
    replacing every "t" of a message because a test passed ``access_token="t"`` would garble it.
    """
    for name in SENSITIVE_HEADERS:
        value = headers.get(name)
        if value:
            for secret in {value, value.rpartition(" ")[2]}:
                if len(secret) >= MIN_SECRET:
                    text = text.replace(secret, REDACTED)
    return text
