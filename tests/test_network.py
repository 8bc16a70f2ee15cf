"""One network behaviour on every path: sync, async on its default pools, async on a user's httpx.AsyncClient.

Each check runs the same scenario through the three paths and asserts the same outcome: proxies from
the environment (a real forward proxy, below) and NO_PROXY, a CA bundle from SSL_CERT_FILE against the
sandbox served over TLS, timeouts and refused connections, the User-Agent and default headers, a
redirect, and bodies of several MB.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import re
import selectors
import socket
import socketserver
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import httpx
import pytest
import trustme
import uvicorn
from helpers import (
    CREDENTIALS,
    GRADIENT_BODY,
    LocalServer,
    call,
    collect,
    json_reply,
    scale_body,
    sse_reply,
)

from wrapper.errors import APIConnectionError, APIStatusError, APITimeoutError
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

SCALE_MODEL = "llama-3-8b-instruct"


# --- a real forward proxy: absolute-URI HTTP requests and CONNECT tunnels ---------------------------------


class ForwardProxy:
    """A minimal HTTP forward proxy on a free local port; ``seen`` records each ``(method, target)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _ProxyHandler)
        self._server.daemon_threads = True
        self._server.proxy = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ForwardProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _ProxyHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline(65537)
        if not line:
            return
        method, target, version = line.decode("latin-1").split()
        headers: list[bytes] = []
        while (header := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
            headers.append(header)
        self.server.proxy.seen.append((method, target))  # type: ignore[attr-defined]
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            with socket.create_connection((host, int(port)), timeout=10) as upstream:
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self._tunnel(upstream)
            return
        url = urllib.parse.urlsplit(target)
        length = next(
            (int(h.split(b":", 1)[1]) for h in headers if h.lower().startswith(b"content-length:")), 0
        )
        body = self.rfile.read(length)
        kept = [h for h in headers if not h.lower().startswith((b"proxy-", b"connection:"))]
        origin = (url.path or "/") + (f"?{url.query}" if url.query else "")
        with socket.create_connection((url.hostname or "", url.port or 80), timeout=10) as upstream:
            head = f"{method} {origin} {version}\r\n".encode() + b"".join(kept) + b"Connection: close\r\n\r\n"
            upstream.sendall(head + body)
            while data := upstream.recv(65536):  # the origin closes once it has answered
                self.wfile.write(data)

    def _tunnel(self, upstream: socket.socket) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.connection, selectors.EVENT_READ, upstream)
            selector.register(upstream, selectors.EVENT_READ, self.connection)
            while True:
                for key, _ in selector.select(timeout=10):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as running:
        yield running


# --- the sandbox over TLS, with a certificate from a throwaway CA -----------------------------------------


@pytest.fixture(scope="module")
def tls_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_sandbox(tls_ca: trustme.CA) -> Iterator[str]:
    """The sandbox on ``https://127.0.0.1:PORT``, its certificate signed by ``tls_ca``."""
    with _tls_sandbox(tls_ca.issue_cert("127.0.0.1", "localhost")) as url:
        yield url


@pytest.fixture(scope="module")
def tls_sandbox_of_another_host(tls_ca: trustme.CA) -> Iterator[str]:
    """The sandbox on ``https://127.0.0.1:PORT``, its certificate (signed by ``tls_ca``) for another host."""
    with _tls_sandbox(tls_ca.issue_cert("api.example")) as url:
        yield url


@contextlib.contextmanager
def _tls_sandbox(cert: trustme.LeafCert) -> Iterator[str]:
    with cert.private_key_and_cert_chain_pem.tempfile() as pem, socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        config = uvicorn.Config(
            Sandbox(seed=0).app, lifespan="off", log_config=None, log_level="warning",
            ssl_certfile=pem, ssl_keyfile=pem, timeout_graceful_shutdown=2,
        )  # fmt: skip
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            assert thread.is_alive(), "the TLS sandbox did not start"
            thread.join(0.01)
        try:
            yield f"https://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True
            thread.join()


@pytest.fixture
def ca_file(tls_ca: trustme.CA) -> Iterator[str]:
    with tls_ca.cert_pem.tempfile() as path:
        yield path


# --- proxies ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_requests_go_through_the_proxy_in_the_environment(
    net_client: Any,
    net_env: pytest.MonkeyPatch,
    proxy: ForwardProxy,
    server: LocalServer,
    path: str,
    variable: str,
) -> None:
    net_env.setenv(variable, proxy.url)
    server.script(json_reply(200, scale_body("proxied")))
    client = net_client("scale", path, server.url)
    assert (await call(client.complete("m", "p"))).text == "proxied"
    assert proxy.seen == [("POST", f"{server.url}/v4/models/m/completions")]
    assert len(server.requests) == 1


async def test_no_proxy_sends_directly(
    net_client: Any, net_env: pytest.MonkeyPatch, proxy: ForwardProxy, server: LocalServer, path: str
) -> None:
    net_env.setenv("HTTP_PROXY", proxy.url)
    net_env.setenv("NO_PROXY", "127.0.0.1")
    client = net_client("scale", path, server.url)
    assert (await call(client.complete("m", "p"))).text == "Paris"
    assert proxy.seen == []
    assert len(server.requests) == 1


async def test_https_through_the_proxy_is_a_connect_tunnel(
    net_client: Any,
    net_env: pytest.MonkeyPatch,
    proxy: ForwardProxy,
    tls_sandbox: str,
    ca_file: str,
    path: str,
) -> None:
    net_env.setenv("HTTPS_PROXY", proxy.url)
    net_env.setenv("SSL_CERT_FILE", ca_file)
    client = net_client("scale", path, tls_sandbox)
    assert (await call(client.complete(SCALE_MODEL, "Alice", max_tokens=3))).response_tokens == 3
    chunks = await collect(client.stream(SCALE_MODEL, "Alice", max_tokens=3))
    assert chunks[-1].finish_reason == "length"
    assert set(proxy.seen) == {("CONNECT", tls_sandbox.removeprefix("https://"))}  # one tunnel or two


# --- TLS: the CA bundle from the environment ---------------------------------------------------------------


async def test_a_ca_bundle_from_ssl_cert_file_is_trusted(
    net_client: Any, net_env: pytest.MonkeyPatch, tls_sandbox: str, ca_file: str, path: str
) -> None:
    net_env.setenv("SSL_CERT_FILE", ca_file)
    client = net_client("scale", path, tls_sandbox)
    result = await call(client.complete(SCALE_MODEL, "Alice", max_tokens=4))
    assert result.response_tokens == 4
    chunks = await collect(client.stream(SCALE_MODEL, "Alice", max_tokens=4))
    assert chunks[-1].response_tokens == 4


class FirstReads:
    """A TLS server on a free local port that answers each request with a Scale completion and keeps, for
    each, what its first read of the request gave: a TLS socket's read returns one record's data at
    most, so a head written apart from its body comes alone."""

    def __init__(self, ca: trustme.CA) -> None:
        self.first: list[bytes] = []
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(self._context)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # the listener closed
            conn, _ = self._listener.accept()
            with self._context.wrap_socket(conn, server_side=True) as tls:
                while data := tls.recv(65536):
                    self.first.append(data)
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
                    while len(body) < length:
                        body += tls.recv(65536)
                    answer = json.dumps(scale_body("Paris")).encode()
                    tls.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(answer), answer))

    def close(self) -> None:
        self._listener.close()
        self._thread.join(5)


def test_a_request_goes_in_one_write(net_env: pytest.MonkeyPatch, tls_ca: trustme.CA, ca_file: str) -> None:
    # the sync client's own pool: httpcore writes a head and its body apart (two TLS records, two
    # packets); they go together, on a new connection and on a kept one
    net_env.setenv("SSL_CERT_FILE", ca_file)
    server = FirstReads(tls_ca)
    try:
        with Scale(api_key="k", base_url=server.url, max_retries=0) as client:
            for prompt in ("first", "second " * 100):
                assert client.complete("m", prompt).text == "Paris"
        assert len(server.first) == 2
        for data, prompt in zip(server.first, ("first", "second " * 100), strict=True):
            assert json.loads(data.partition(b"\r\n\r\n")[2]) == {"prompt": prompt}
    finally:
        server.close()


async def test_an_unknown_ca_is_refused(net_client: Any, tls_sandbox: str, path: str) -> None:
    client = net_client("scale", path, tls_sandbox)
    with pytest.raises(APIConnectionError) as caught:
        await call(client.complete(SCALE_MODEL, "Alice", max_tokens=4))
    assert type(caught.value) is APIConnectionError
    assert "(TLS certificate not trusted: unable to get local issuer certificate): set SSL_CERT_FILE" in str(
        caught.value
    )


async def test_a_certificate_of_another_host_is_named_so_without_the_ca_bundle_advice(
    net_client: Any,
    net_env: pytest.MonkeyPatch,
    tls_sandbox_of_another_host: str,
    ca_file: str,
    path: str,
) -> None:
    """The CA is trusted: a CA bundle would not help, the host in base_url is what to check."""
    net_env.setenv("SSL_CERT_FILE", ca_file)
    client = net_client("scale", path, tls_sandbox_of_another_host)
    with pytest.raises(APIConnectionError) as caught:
        await call(client.complete(SCALE_MODEL, "Alice", max_tokens=4))
    message = str(caught.value)
    assert (
        "(TLS certificate of another host: IP address mismatch, certificate is not valid for '127.0.0.1'.)"
        in (message)
    )
    assert "base_url's host must be one the certificate names" in message
    assert "SSL_CERT_FILE" not in message


# --- timeouts and refused connections ----------------------------------------------------------------------


@contextlib.contextmanager
def full_backlog() -> Iterator[str]:
    """A listening socket that never accepts, its backlog filled: a new connection hangs in connect()."""
    with socket.socket() as listener, contextlib.ExitStack() as stack:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        for _ in range(16):
            filler = stack.enter_context(socket.socket())
            filler.settimeout(0.2)
            try:
                filler.connect(address)
            except TimeoutError:
                break
        else:
            pytest.fail("could not fill the listening socket's backlog")
        yield f"http://127.0.0.1:{address[1]}"


async def test_a_connect_timeout(net_client: Any, path: str) -> None:
    with full_backlog() as url:
        client = net_client("scale", path, url, timeout=httpx.Timeout(10.0, connect=0.2))
        with pytest.raises(APITimeoutError):
            await call(client.complete("m", "p"))


async def test_a_read_timeout(net_client: Any, server: LocalServer, path: str) -> None:
    def slow(handler: Any) -> None:
        time.sleep(0.5)
        json_reply(200, scale_body())(handler)

    server.script(slow)
    client = net_client("scale", path, server.url, timeout=httpx.Timeout(10.0, read=0.1))
    with pytest.raises(APITimeoutError):
        await call(client.complete("m", "p"))


async def test_a_refused_connection(net_client: Any, path: str) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = net_client("scale", path, f"http://127.0.0.1:{port}")
    with pytest.raises(APIConnectionError) as caught:
        await call(client.complete("m", "p"))
    assert type(caught.value) is APIConnectionError
    # One wording whichever transport met it: where, why, what to check.
    assert str(caught.value) == (
        f"cannot connect to 127.0.0.1:{port} (connection refused): "
        "check base_url, and that the server is up and reachable (after 1 attempt)"
    )
    with pytest.raises(
        APIConnectionError, match=rf"^cannot connect to 127.0.0.1:{port} \(connection refused\)"
    ):
        await collect(client.stream("m", "p"))


# --- headers -----------------------------------------------------------------------------------------------


def expected_user_agent(library: ModuleType) -> re.Pattern[str]:
    """``completion-clients/<version> httpx/<version>``, or ``httpx2/<version>`` on httpx2."""
    try:
        version = re.escape(importlib.metadata.version("completion-clients"))
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return re.compile(rf"completion-clients/{version} {library.__name__}/{re.escape(library.__version__)}")


@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_user_agent_and_default_headers_on_every_request(
    net_client: Any, server: LocalServer, path: str, provider: str, library: ModuleType
) -> None:
    reply = json_reply(200, scale_body() if provider == "scale" else GRADIENT_BODY)
    events = ['data: {"completions": [["p", ["Hi"]]], "finish_reason": "stop"}']
    server.script(reply, sse_reply(events) if provider == "scale" else reply, reply)
    base_url = server.url if provider == "scale" else server.url + "/api"
    client = net_client(provider, path, base_url, default_headers={"X-Team": "search", "X-Trace": "t-1"})
    await call(client.complete("m", "p"))
    await collect(client.stream("m", "p"))
    await call(client.with_options(max_retries=1).complete("m", "p"))
    assert len(server.requests) == 3
    for _, _, headers, _ in server.requests:
        assert expected_user_agent(library).fullmatch(headers["user-agent"]), headers["user-agent"]
        assert (headers["x-team"], headers["x-trace"]) == ("search", "t-1")


async def test_default_headers_do_not_replace_credentials(
    net_client: Any, server: LocalServer, path: str
) -> None:
    client = net_client(
        "scale", path, server.url, default_headers={"x-api-key": "other", "User-Agent": "mine/1"}
    )
    await call(client.complete("m", "p"))
    headers = server.requests[0][2]
    assert (headers["x-api-key"], headers["user-agent"]) == (CREDENTIALS["scale"]["api_key"], "mine/1")


# --- redirects and large bodies ----------------------------------------------------------------------------


async def test_a_redirect_is_not_followed(net_client: Any, server: LocalServer, path: str) -> None:
    server.script(
        json_reply(307, {"detail": "moved"}, {"location": f"{server.url}/elsewhere"}),
        json_reply(200, scale_body("must not be asked")),
    )
    # The user's client would follow redirects on its own; the clients never do (credentials would go along).
    client = net_client("scale", path, server.url, user_options={"follow_redirects": True}, max_retries=2)
    with pytest.raises(APIStatusError) as caught:
        await call(client.complete("m", "p"))
    assert type(caught.value) is APIStatusError
    assert caught.value.status_code == 307
    assert f"redirect to {server.url}/elsewhere not followed" in str(caught.value)
    assert len(server.requests) == 1


async def test_bodies_of_several_megabytes(net_client: Any, server: LocalServer, path: str) -> None:
    answer, prompt = "word " * 1_200_000, "prompt " * 700_000  # 6 MB and 4.9 MB
    server.script(json_reply(200, scale_body(answer)))
    client = net_client("scale", path, server.url)
    result = await call(client.complete("m", prompt))
    assert result.text == answer
    assert server.requests[0][3] == {"prompt": prompt}
