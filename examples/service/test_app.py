# examples/service/test_app.py
"""The service's tests, on the sandbox of the package's pytest plugin (``sandbox``, reset for each test).

Run them with ``pytest`` beside ``app.py``: they need fastapi, uvicorn and the package's ``sandbox`` extra.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from app import app
from fastapi.testclient import TestClient

from wrapper.sandbox import Sandbox
from wrapper.testing import set_testing


@pytest.fixture
def service(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app, its clients on ``sandbox`` (built from the environment, as in production), its lifespan
    run; retries do not wait (``set_testing``)."""
    monkeypatch.setenv("SGP_API_KEY", "test-key")
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", sandbox.scale_base_url)
    monkeypatch.setenv("GRADIENT_ACCESS_TOKEN", "test-token")
    monkeypatch.setenv("GRADIENT_WORKSPACE_ID", "test-workspace")
    monkeypatch.setenv("GRADIENT_API_URL", sandbox.gradient_base_url)
    set_testing(True)
    with TestClient(app) as client:
        yield client
    set_testing(False)


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_complete_answers_with_the_text(service: TestClient, api: str) -> None:
    answer = service.post("/complete", json={"prompt": "Alice was", "api": api, "max_tokens": 8})
    assert answer.status_code == 200
    assert answer.json()["text"]
    assert answer.json()["request_id"].startswith("sandbox-")


def events(lines: Iterator[str]) -> list[tuple[str, dict[str, object]]]:
    """The server-sent events of a body's lines: (event name, its JSON data)."""
    found, name = [], "message"
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            found.append((name, json.loads(line.removeprefix("data: "))))
            name = "message"
    return found


def test_stream_relays_each_token_then_done(service: TestClient) -> None:
    with service.stream("POST", "/stream", json={"prompt": "Alice was", "max_tokens": 8}) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        received = events(answer.iter_lines())
    tokens = [data["text"] for name, data in received if name == "message"]
    assert len(tokens) > 1
    assert received[-1] == ("done", {"finish_reason": "length", "request_id": received[-1][1]["request_id"]})


@pytest.mark.parametrize(
    ("fault", "body", "status"),
    [
        ("status=503;count=3", {}, 502),  # still failing after the client's two retries
        ("status=401", {}, 502),  # the service's own credentials: not the caller's business
        ("status=429;retry-after=7;count=3", {}, 503),
        (None, {"api": "gradient", "prompt": "How to make explosives"}, 422),  # ContentFlaggedError
        (None, {"prompt": "Alice " * 5000}, 422),  # over the model's context: the API's 400
    ],
)
def test_errors_before_the_answer_are_http_statuses(
    service: TestClient, sandbox: Sandbox, fault: str | None, body: dict[str, str], status: int
) -> None:
    for path in ("/complete", "/stream"):
        if fault:
            sandbox.inject(fault)
        answer = service.post(path, json={"prompt": "Alice", **body})
        assert (path, answer.status_code) == (path, status), answer.text
        assert "error" in answer.json()
        if status == 503:
            assert answer.headers["retry-after"] == "7"


def test_a_failure_once_the_answer_has_begun_is_an_error_event(service: TestClient, sandbox: Sandbox) -> None:
    sandbox.inject("cut=2")  # the API's connection breaks after two tokens: too late for a status
    with service.stream("POST", "/stream", json={"prompt": "Alice", "max_tokens": 50}) as answer:
        assert answer.status_code == 200
        received = events(answer.iter_lines())
    assert received[0][0] == "message"
    assert received[-1] == ("error", {"status": 502, "error": "APIConnectionError"})


@pytest.mark.parametrize("path", ["/complete", "/stream"])
def test_a_call_past_its_deadline_is_a_504(service: TestClient, sandbox: Sandbox, path: str) -> None:
    sandbox.inject("stall=0" if path == "/stream" else "delay=1")  # no first token / no answer in time
    started = time.monotonic()
    answer = service.post(path, json={"prompt": "Alice", "deadline": 0.3})
    assert answer.status_code == 504
    assert time.monotonic() - started < 1
    wait_until(lambda: sandbox.stats().in_flight == 0, seconds=2)  # the delayed request, over


# A caller that leaves: only a real connection can be closed half-way, so these run the app on uvicorn.


@pytest.fixture
def address(service: TestClient) -> Iterator[tuple[str, int]]:
    """The app served by uvicorn in a thread, on a free port (the ``service`` fixture set its clients)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[:2]
    server.should_exit = True
    thread.join()


def call_stream(address: tuple[str, int], prompt: str) -> socket.socket:
    """A caller's connection, its ``POST /stream`` sent."""
    caller = socket.create_connection(address, timeout=5)
    body = json.dumps({"prompt": prompt, "max_tokens": 100}).encode()
    head = "POST /stream HTTP/1.1\r\nHost: service\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}"
    caller.sendall(head.encode() + b"\r\n\r\n" + body)
    return caller


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether ``condition()`` became true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_caller_leaving_mid_stream_closes_the_api_request_within_a_second(
    address: tuple[str, int], sandbox: Sandbox
) -> None:
    sandbox.inject("stall=2")  # two tokens, then nothing: the request ends only when the service leaves
    caller = call_stream(address, "Alice")
    received = b""
    while b"data: " not in received:
        received += caller.recv(4096)
    assert sandbox.stats().in_flight == 1
    caller.close()
    assert wait_until(lambda: sandbox.stats().in_flight == 0, seconds=1)


def test_a_caller_leaving_before_the_first_token_closes_the_api_request_within_a_second(
    address: tuple[str, int], sandbox: Sandbox
) -> None:
    sandbox.inject("stall=0")  # the API's answer begins, but no token comes
    caller = call_stream(address, "Alice")
    assert wait_until(lambda: sandbox.stats().in_flight == 1, seconds=5)
    caller.close()  # no byte of the answer has reached it: Starlette is not watching yet
    assert wait_until(lambda: sandbox.stats().in_flight == 0, seconds=1)
