"""A credential the server sends back never shows, whole or in part, escaped or encoded: not in an error's
``str``, ``repr`` or ``args``, not in the causes its traceback shows, not in the log.

Each answer of ``echo_secret_reply`` puts the credential the request carried where a message quotes
the server: JSON-escaped in a body the message cuts at 500 characters, repr-escaped in a body that is
not JSON, URL-encoded in a redirect's ``Location``, in a flagged sample cut at 60 characters, and in a
garbled status line that the transport's own exception quotes. The credentials hold every character
those forms escape. Each runs on the sync client and on both async lanes (aiohttp, httpx).
"""

from __future__ import annotations

import logging
import socket
import traceback
from typing import Any

import pytest
from helpers import ECHOES, ESCAPED_CREDENTIALS, LocalServer, call, echo_secret_reply, fragments

from wrapper.errors import APIConnectionError, APIError

SECRET = {"scale": "api_key", "gradient": "access_token"}


def shown(error: BaseException) -> list[str]:
    """Every text of ``error`` a user or a log could see: its message, ``repr``, ``args`` and traceback."""
    texts = [str(error), repr(error), repr(error.args), "".join(traceback.format_exception(error))]
    return texts + ([error.message] if isinstance(error, APIError) else [])


@pytest.mark.parametrize("kind", ECHOES)
@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_a_credential_the_server_echoes_shows_nowhere_in_any_form(
    make_client: Any,
    server: LocalServer,
    lane: str,
    provider: str,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    credentials = ESCAPED_CREDENTIALS[provider]
    secret = credentials[SECRET[provider]]
    server.script(echo_secret_reply(kind))
    base_url = server.url + ("/api" if provider == "gradient" else "")
    client = make_client(provider, lane, base_url=base_url, max_retries=1, **credentials)
    with caplog.at_level(logging.DEBUG, logger="wrapper"), pytest.raises(APIError) as caught:
        await call(client.complete("m", "p"))
    assert secret in server.requests[-1][2].get("x-api-key", server.requests[-1][2].get("authorization", ""))
    texts = [*shown(caught.value), caplog.text]
    assert "<redacted>" in str(caught.value)  # the echo reached the message, replaced where it stood
    assert [part for part in fragments(secret) if any(part in text for text in texts)] == []


async def test_the_failed_after_line_redacts_the_url_as_every_log_line_does(
    make_client: Any, lane: str, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client("scale", lane, base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with caplog.at_level(logging.DEBUG, logger="wrapper"), pytest.raises(APIConnectionError):
        await call(client.complete("m", "p", extra_query={"sig": "signed-SECRET-value"}))
    (line,) = [r.getMessage() for r in caplog.records if "failed after" in r.getMessage()]
    assert line.startswith(
        f"POST http://127.0.0.1:{port}/v4/models/m/completions?sig=<redacted> failed after "
    )
    assert "signed-SECRET-value" not in caplog.text
