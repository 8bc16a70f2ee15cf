"""The sandbox under bad input: huge bodies, slow and idle clients, JSON that is not JSON, credentials
compared in constant time, and its own fault routes guarded like the APIs. Each on a real socket."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import hmac
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from helpers import call
from sandbox_fixtures import _no_faults_left, recording_sandbox, spec_problems  # noqa: F401

from wrapper import errors
from wrapper.sandbox import Sandbox

SCALE_PATH = "/v4/models/llama-3-8b-instruct/completions"
GRADIENT_PATH = "/api/models/nous-hermes2/complete"
SCALE_HEADERS = {"x-api-key": "k"}
GRADIENT_HEADERS = {"authorization": "Bearer t", "x-gradient-workspace-id": "w"}
APIS = {"scale": (SCALE_PATH, SCALE_HEADERS), "gradient": (GRADIENT_PATH, GRADIENT_HEADERS)}
DEEP = b'{"prompt": "a", "query": "a", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


def _raw(url: str, head: bytes, timeout: float = 20.0) -> socket.socket:
    """A socket connected to the sandbox at ``url`` that has sent ``head``."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.sendall(head)
    return sock


def _closed_by_server(sock: socket.socket, dribble: bytes = b"") -> bool:
    """Whether the server closes ``sock`` while it sends ``dribble`` a byte every 50 ms, then nothing
    (the socket's timeout bounds the wait)."""
    try:
        for byte in dribble:
            sock.send(bytes([byte]))
            time.sleep(0.05)
        return sock.recv(65536) == b""
    except (BrokenPipeError, ConnectionResetError):
        return True
    except TimeoutError:
        return False


def _head(path: str, headers: dict[str, str], **more: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: sandbox", *(f"{k}: {v}" for k, v in {**headers, **more}.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, Any]:
    """The status and JSON body of the next response on ``sock`` (framed by its ``Content-Length``)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?im)^content-length: *(\d+)", head)[1])  # type: ignore[index]
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split()[1]), json.loads(body)


# -- bodies over the cap ------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_body_over_the_cap_is_answered_413_before_it_is_sent(api: str) -> None:
    path, headers = APIS[api]
    with Sandbox(max_body=10_000) as sb:
        # 150 MB announced, 4 bytes sent: the answer comes without waiting for the rest
        sock = _raw(sb.url, _head(path, headers, **{"content-length": "150000000"}) + b'{"pr', timeout=10)
        with sock:
            status, body = _answer(sock)
        assert status == 413
        message = body["detail"] if api == "scale" else body["message"]
        assert "150000000 bytes is over the sandbox's limit of 10000" in message
        assert "--max-body" in message
        if api == "gradient":
            assert body["type"] == "failed"  # Gradient's typed error shape


def test_a_chunked_body_is_refused_once_it_passes_the_cap() -> None:
    with Sandbox(max_body=10_000) as sb:
        head = _head(SCALE_PATH, SCALE_HEADERS, **{"transfer-encoding": "chunked"})
        chunk = b"a" * 4096
        sock = _raw(sb.url, head + (b"1000\r\n" + chunk + b"\r\n") * 3, timeout=10)  # 12 KiB, never ended
        with sock:
            status, body = _answer(sock)
        assert status == 413
        assert "over the sandbox's limit of 10000 bytes" in body["detail"]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads a process's memory in /proc")
def test_a_150_mb_body_does_not_grow_the_sandboxs_memory() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "wrapper.sandbox", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[-1]  # "... Scale at http://HOST:PORT"
        before = _peak_memory(process.pid)
        sock = _raw(url, _head(SCALE_PATH, SCALE_HEADERS, **{"content-length": str(150 * 2**20)}))
        with sock:
            block = b"a" * 2**20
            for _ in range(150):  # the whole body, as a client that ignores early answers would send it
                sock.sendall(block)
            status, _ = _answer(sock)
        assert status == 413
        assert _peak_memory(process.pid) - before < 30 * 2**20  # it was not read whole: 150 MB were
    finally:
        process.terminate()
        process.communicate(timeout=10)


def _peak_memory(pid: int) -> int:
    """The peak resident memory of process ``pid``, in bytes (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    return int(kib) * 1024


@pytest.mark.parametrize("api", APIS)
async def test_every_client_lane_gets_the_413(make_client: Callable[..., Any], lane: str, api: str) -> None:
    with Sandbox(max_body=100_000) as sb:
        client = make_client(api, lane, base_url=sb.base_url(api), max_retries=2)
        for _ in range(3):  # and the connection is fit for the next request
            with pytest.raises(errors.APIStatusError) as refused:
                await call(client.complete(_model(api), "Alice " * 200_000))
            assert refused.value.status_code == 413
        assert sb.stats().requests == 3  # not retried, and never a connection reset
        assert (await call(client.complete(_model(api), "Alice"))).text


def _model(api: str) -> str:
    return "llama-3-8b-instruct" if api == "scale" else "nous-hermes2"


def test_the_cap_is_raised_with_max_body() -> None:
    prompt = "Alice " * 300_000  # 1.8 MB: over the default 1 MiB
    with Sandbox() as sb, httpx.Client(headers=SCALE_HEADERS, timeout=20) as http:
        url = sb.scale_base_url + SCALE_PATH
        assert http.post(url, json={"prompt": prompt, "max_tokens": 1}).status_code == 413
    with Sandbox(max_body=4 * 2**20) as sb, httpx.Client(headers=SCALE_HEADERS, timeout=20) as http:
        answer = http.post(sb.scale_base_url + SCALE_PATH, json={"prompt": prompt, "max_tokens": 1})
        assert answer.status_code == 422  # read and validated: the prompt is over the context
        assert answer.json()["detail"][0]["loc"] == ["body", "max_tokens"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1000"])
def test_max_body_must_be_a_whole_number_of_bytes(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_body must be a whole number of bytes >= 1"):
        Sandbox(max_body=bad)


# -- slow and idle clients ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def impatient() -> Iterator[Sandbox]:
    """A sandbox giving each client 1 s to send a request's head, then its body."""
    with Sandbox(client_timeout=1.0) as sb:
        yield sb


def test_a_connection_that_sends_nothing_is_closed(impatient: Sandbox) -> None:
    with _raw(impatient.url, b"") as sock:
        assert _closed_by_server(sock)


def test_thirty_slow_header_connections_are_all_closed(impatient: Sandbox) -> None:
    head = _head(SCALE_PATH, SCALE_HEADERS)
    socks = [_raw(impatient.url, head[:10]) for _ in range(30)]
    try:
        # a byte every 50 ms from the first: each head would take far longer than the 1 s allowed
        assert _closed_by_server(socks[0], dribble=head[10:])
        assert all(_closed_by_server(sock) for sock in socks[1:])
    finally:
        for sock in socks:
            sock.close()


def test_a_head_dribbled_after_an_answer_is_closed_too(impatient: Sandbox) -> None:
    body = b'{"prompt": "Alice", "max_tokens": 1}'
    head = _head(SCALE_PATH, SCALE_HEADERS, **{"content-length": str(len(body))})
    with _raw(impatient.url, head + body) as sock:
        assert _answer(sock)[0] == 200
        assert _closed_by_server(sock, dribble=head)  # each byte would restart uvicorn's keep-alive timer


@pytest.mark.parametrize("api", APIS)
def test_a_stalled_body_is_answered_408_in_the_apis_shape_and_closed(impatient: Sandbox, api: str) -> None:
    path, headers = APIS[api]
    with _raw(impatient.url, _head(path, headers, **{"content-length": "100"}) + b'{"prompt"') as sock:
        status, body = _answer(sock)
        assert sock.recv(65536) == b""  # then closed
    assert status == 408
    message = body["detail"] if api == "scale" else body["message"]
    assert message == "Request body incomplete 1 s after its head (received 9 bytes)"
    assert impatient.stats().in_flight == 0


def test_client_timeout_must_be_a_positive_number() -> None:
    with pytest.raises(ValueError, match="client_timeout must be a positive number"):
        Sandbox(client_timeout=0)


# -- JSON that is not JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"prompt": "a", "query": "a", "temperature": NaN}', "NaN is not JSON"),
        (b'{"prompt": "a", "query": "a", "temperature": Infinity}', "Infinity is not JSON"),
        (b'{"prompt": "a", "query": "a", "temperature": -Infinity}', "-Infinity is not JSON"),
        (b'{"prompt": "a", "query": "a", "temperature": 1e999}', "the number 1e999 is too large"),
        (DEEP, "arrays and objects nested deeper than 64 levels"),
        (b'{"prompt": "a", "query": "a", "x": ' + b"[" * 64 + b"]" * 64 + b"}", "nested deeper than 64"),
    ],
    ids=["nan", "infinity", "-infinity", "overflow", "100000-deep", "65-deep"],
)
@pytest.mark.parametrize("api", APIS)
def test_json_that_is_not_json_gets_each_apis_own_validation_error(
    recording_sandbox: Sandbox, api: str, body: bytes, why: str
) -> None:
    path, headers = APIS[api]
    answer = httpx.post(recording_sandbox.url + path, content=body, headers=headers, timeout=10)
    exchange = recording_sandbox.exchanges[-1]
    assert spec_problems(exchange) == []  # the shape the spec gives that status
    if api == "scale":
        assert answer.status_code == 422
        (item,) = answer.json()["detail"]
    else:
        assert (answer.status_code, answer.json()["type"]) == (400, "bodyParsingError")
        (item,) = answer.json()["payload"]["validationError"]
    assert item["type"] == "json_invalid"
    assert why in item["ctx"]["error"]


@pytest.mark.parametrize("api", APIS)
def test_nesting_up_to_the_limit_is_read_as_json(recording_sandbox: Sandbox, api: str) -> None:
    path, headers = APIS[api]
    body = b'{"prompt": "a", "query": "a", "x": ' + b"[" * 63 + b"]" * 63 + b"}"  # 64 levels
    answer = httpx.post(recording_sandbox.url + path, content=body, headers=headers, timeout=10)
    # read, then validated: Scale's spec refuses fields it does not name, Gradient's takes them
    assert answer.status_code == (422 if api == "scale" else 200)
    assert "json_invalid" not in answer.text
    assert spec_problems(recording_sandbox.exchanges[-1]) == []


def test_the_fault_route_refuses_json_that_is_not_json(recording_sandbox: Sandbox) -> None:
    faults = recording_sandbox.url + "/_sandbox/faults"
    for body, why in [(b'{"delay": NaN}', "NaN is not JSON"), (DEEP, "nested deeper than 64")]:
        answer = httpx.post(faults, content=body, timeout=10)
        assert answer.status_code == 400
        assert why in answer.json()["detail"]
    assert httpx.get(faults).json() == []


# -- credentials --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def strict() -> Iterator[Sandbox]:
    """A sandbox taking one Scale key and one Gradient token."""
    with Sandbox(api_key="the-key", access_token="the-token") as sb:
        yield sb


def test_credentials_are_compared_in_constant_time(strict: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def compare_digest(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare_digest)
    url = strict.scale_base_url + SCALE_PATH
    for key, status in [("the-kex", 401), ("the-key", 200)]:
        answer = httpx.post(
            url, json={"prompt": "a", "max_tokens": 1}, headers={"x-api-key": key}, timeout=10
        )
        assert answer.status_code == status
    assert compared == [(b"the-kex", b"the-key"), (b"the-key", b"the-key")]


def test_a_credential_that_is_not_ascii_is_refused_not_a_crash(strict: Sandbox) -> None:
    url = strict.scale_base_url + SCALE_PATH
    answer = httpx.post(url, json={"prompt": "a"}, headers={"x-api-key": "ключ".encode()}, timeout=10)
    assert (answer.status_code, answer.json()["detail"]) == (
        401,
        "Not authenticated: the API key sent was refused",
    )


@pytest.mark.parametrize("route", ["/_sandbox/faults", "/_sandbox/stats"])
def test_the_sandboxs_own_routes_want_a_credential_it_takes(strict: Sandbox, route: str) -> None:
    url = strict.url + route
    for refused in [{}, {"x-api-key": "another"}, {"authorization": "Bearer another"}]:
        for method in ("GET", "DELETE"):
            answer = httpx.request(method, url, headers=refused, timeout=10)
            assert answer.status_code == 401
            assert "('Authorization: Bearer <token>' or the x-api-key header)" in answer.json()["detail"]
    for accepted in [{"x-api-key": "the-key"}, {"authorization": "Bearer the-token"}]:
        assert httpx.get(url, headers=accepted, timeout=10).status_code == 200
    if route == "/_sandbox/faults":
        answer = httpx.post(url, json={"status": 503}, headers={"x-api-key": "another"}, timeout=10)
        assert answer.status_code == 401
        assert httpx.get(url, headers={"x-api-key": "the-key"}, timeout=10).json() == []  # nothing queued


def test_a_fault_header_from_a_caller_the_api_refuses_is_not_obeyed(strict: Sandbox) -> None:
    url = strict.scale_base_url + SCALE_PATH
    for key in ("another", ""):
        headers = {"x-api-key": key, "x-sandbox-fault": "status=503;retry-after=30"}
        answer = httpx.post(url, json={"prompt": "a"}, headers=headers, timeout=10)
        assert answer.status_code == 401
        assert "retry-after" not in answer.headers
    headers = {"x-api-key": "the-key", "x-sandbox-fault": "status=503"}
    assert httpx.post(url, json={"prompt": "a"}, headers=headers, timeout=10).status_code == 503


def test_the_sandboxs_routes_stay_open_without_given_credentials(recording_sandbox: Sandbox) -> None:
    assert httpx.get(recording_sandbox.url + "/_sandbox/faults", timeout=10).status_code == 200
    assert httpx.get(recording_sandbox.url + "/_sandbox/models", timeout=10).status_code == 200
