"""Keeping credentials out of logs; exception messages are scrubbed where the errors are built.

The names of the credential-bearing headers and the ``scrub`` of messages live with the exception
tree (``generated/exceptions.py``, copied from ``scripts/templates/exceptions.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from generated.exceptions import REDACTED, SENSITIVE_HEADERS


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with the value of every credential-bearing header replaced."""
    return {name: REDACTED if name.lower() in SENSITIVE_HEADERS else value for name, value in headers.items()}
