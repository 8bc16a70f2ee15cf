"""HTTP/2 is opt-in and never leaks: a client with ``http2=True`` speaks h2 to an h2-capable server, and
every other client, on every lane and both libraries, still speaks HTTP/1.1 to it afterwards.

httpcore sets the ALPN protocols of the TLS context it is given on each connection. When the clients'
shared context went to an ``http2=True`` client, every default connection offered h2 from then on, and
the aiohttp lane (which speaks HTTP/1.1 alone) read the server's first h2 frame as a status line:
``APIConnectionError ... Bad status line``. The server here is hypercorn over TLS, offering h2 and
http/1.1; each answer's text is the HTTP version the server saw.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trustme
from helpers import call, collect
from hypercorn.asyncio import serve
from hypercorn.config import Config

import wrapper
from wrapper.scale import AsyncScale, Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Scale's endpoint, answering with the request's HTTP version (a stream's as one event)."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = json.loads(body)
    answer = json.dumps(
        {"completions": [[request["prompt"], [scope["http_version"]]]], "finish_reason": "stop"}
    )
    content, kind = answer.encode(), b"application/json"
    if request.get("stream"):
        content, kind = b"data: %s\n\n" % content, b"text/event-stream"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
    await send({"type": "http.response.body", "body": content})


@pytest.fixture(scope="module")
def h2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """hypercorn over TLS on a free port, offering h2 and http/1.1: its URL and its CA's PEM file."""
    folder = tmp_path_factory.mktemp("h2")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(folder / "key.pem"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "cert.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # hypercorn's now: it closes it
    config.certfile, config.keyfile = str(folder / "cert.pem"), str(folder / "key.pem")
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = config.errorlog = None
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(
        target=loop.run_until_complete, args=(serve(_app, config, shutdown_trigger=stop.wait),)
    )
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}", folder / "ca.pem"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def _default_client(library: ModuleType, asynchronous: bool, **options: Any) -> Any:
    """A client with the package's defaults: ``DefaultHttpxClient``, ... of ``library``."""
    suffix = "2" if library.__name__ == "httpx2" else ""
    return getattr(wrapper, f"Default{'Async' if asynchronous else ''}Httpx{suffix}Client")(**options)


async def _versions(client: Any) -> list[str]:
    """The HTTP version the server saw for a ``complete`` and for a ``stream`` of ``client``."""
    try:
        completed = (await call(client.complete("m", "p"))).text
        streamed = "".join(chunk.text for chunk in await collect(client.stream("m", "p")))
    finally:
        await call(client.close())
    return [completed, streamed]


LANES = {
    "sync": {},
    "sync-httpx-pool": {"proxy": True},  # httpx's own pool, which a proxy in the environment chooses
    "aiohttp": {"asynchronous": True},
    "async-httpx-pool": {"asynchronous": True, "proxy": True},
    "sync-default-client": {"default_client": True},
    "async-default-client": {"asynchronous": True, "default_client": True},
}


@pytest.mark.parametrize("h2", ["sync", "async"])
async def test_an_http2_client_leaves_every_other_lane_on_http11(
    h2_server: tuple[str, Path], library: ModuleType, monkeypatch: pytest.MonkeyPatch, h2: str
) -> None:
    """Before each lane's calls, an ``http2=True`` client's (which set h2 on the context it was given)."""
    url, ca = h2_server
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    asynchronous = h2 == "async"
    seen = {}
    for lane, how in LANES.items():
        http2 = _default_client(library, asynchronous, http2=True)
        h2_client = (AsyncScale if asynchronous else Scale)(api_key="k", base_url=url, http_client=http2)
        assert await _versions(h2_client) == ["2", "2"]
        with monkeypatch.context() as env:
            if how.get("proxy"):
                env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # never reached: NO_PROXY covers loopback
                env.setenv("NO_PROXY", "127.0.0.1")
            options: dict[str, Any] = {"api_key": "k", "base_url": url, "max_retries": 0}
            if how.get("default_client"):
                options["http_client"] = _default_client(library, how.get("asynchronous", False))
            client = (AsyncScale if how.get("asynchronous") else Scale)(**options)
            seen[lane] = await _versions(client)
    assert seen == {lane: ["1.1", "1.1"] for lane in LANES}
