"""Keeping credentials out of logs and messages; exception messages are scrubbed where the errors are built.

The names of the credential-bearing headers and the ``scrub`` of messages live with the exception
tree (``generated/exceptions.py``, copied from ``scripts/templates/exceptions.py``); the exceptions a
transport raised, which a typed error carries as its cause, are scrubbed here (``scrub_chain``).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from wrapper._generated.exceptions import REDACTED, SENSITIVE_HEADERS, scrub


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


class ScrubbedError(Exception):
    """Stands in a chain of causes for an exception whose text showed a credential and could not be
    rewritten; its message is that exception's class and text, scrubbed."""


def scrub_chain(exc: BaseException, headers: Mapping[str, str]) -> None:
    """Scrub, in place, the text of ``exc`` and of every exception chained under it (its causes and
    contexts, as a traceback shows them) of the credentials sent in ``headers``: a transport's error may
    quote what the server sent back, a status line echoing the key for one.

    Their string arguments, text attributes and notes are scrubbed; one below ``exc`` whose text still
    shows a credential (built from other state) is replaced in the chain by a ``ScrubbedError``.
    """
    seen: set[int] = set()

    def cleaned(current: BaseException) -> BaseException:
        if id(current) in seen:
            return current
        seen.add(id(current))
        _scrub_in_place(current, headers)
        for link in ("__cause__", "__context__"):
            chained = getattr(current, link)
            if chained is not None and (clean := cleaned(chained)) is not chained:
                suppressed = current.__suppress_context__
                setattr(current, link, clean)
                current.__suppress_context__ = suppressed  # setting __cause__ would set it
        if current is exc or not _shows_secret(current, headers):
            return current
        stand_in = ScrubbedError(
            f"{type(current).__module__}.{type(current).__qualname__}: {_text(current, headers)}"
        )
        stand_in.__cause__, stand_in.__context__ = current.__cause__, current.__context__
        stand_in.__suppress_context__ = current.__suppress_context__
        return stand_in.with_traceback(current.__traceback__)

    cleaned(exc)


def _scrub_in_place(exc: BaseException, headers: Mapping[str, str]) -> None:
    exc.args = tuple(_scrubbed(arg, headers) for arg in exc.args)
    state = getattr(exc, "__dict__", {})
    for name, value in state.items():
        state[name] = _scrubbed(value, headers)
    if isinstance(exc, OSError):  # its text is built from these, not from args
        for name in ("strerror", "filename", "filename2"):
            value = getattr(exc, name)
            if isinstance(value, str | bytes):
                setattr(exc, name, _scrubbed(value, headers))
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        notes[:] = [_scrubbed(note, headers) for note in notes]


def _scrubbed(value: object, headers: Mapping[str, str]) -> object:
    """A string (or bytes, read as Latin-1) scrubbed; anything else as it is."""
    if isinstance(value, str):
        return scrub(value, headers)
    if isinstance(value, bytes | bytearray):
        return type(value)(scrub(value.decode("latin-1"), headers).encode("latin-1"))
    return value


def _shows_secret(exc: BaseException, headers: Mapping[str, str]) -> bool:
    try:
        texts = (str(exc), repr(exc))
    except Exception:  # a __str__ that fails shows nothing
        return False
    return any(scrub(text, headers) != text for text in texts)


def _text(exc: BaseException, headers: Mapping[str, str]) -> str:
    try:
        return scrub(str(exc), headers)
    except Exception:
        return ""
