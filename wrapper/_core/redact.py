"""Keeping credentials out of logs and messages; exception messages are scrubbed where the errors are built.

The names of the credential-bearing headers and the ``scrub`` of messages live with the exception
tree (``generated/exceptions.py``, copied from ``scripts/templates/exceptions.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from wrapper._generated.exceptions import REDACTED, SENSITIVE_HEADERS


def redacted_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with the value of every credential-bearing header replaced."""
    return {name: REDACTED if name.lower() in SENSITIVE_HEADERS else value for name, value in headers.items()}


def redacted_url(url: str | httpx.URL) -> str:
    """``url`` (a string, an ``httpx.URL`` or an ``httpx2.URL``) as a message shows it: its user info and
    the value of each query parameter replaced (either may be a credential), its fragment left out."""
    parsed = httpx.URL(url if isinstance(url, str | httpx.URL) else str(url))
    if not parsed.userinfo and not parsed.query and not parsed.fragment:
        return str(url)
    scheme, _, rest = str(parsed.copy_with(userinfo=b"", query=None, fragment=None)).partition("://")
    shown = f"{scheme}://{REDACTED + '@' if parsed.userinfo else ''}{rest}"
    names = dict.fromkeys(parsed.params.keys())
    return shown + ("?" + "&".join(f"{name}={REDACTED}" for name in names) if names else "")
