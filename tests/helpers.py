"""Helpers shared by test modules (fixtures stay in conftest)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``condition`` every 10 ms until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def batch_threads() -> list[threading.Thread]:
    """The live worker threads of sync ``complete_many`` batches."""
    return [t for t in threading.enumerate() if t.name.startswith("complete_many")]


class Held:
    """A scripted reply that holds each request until ``release()`` (or 10 s), then answers with ``reply``.

    ``held`` counts the requests waiting now; ``answered`` those answered after being held.
    """

    def __init__(self, reply: Callable[[Any], None]) -> None:
        self._reply = reply
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.held = 0
        self.answered = 0

    def release(self) -> None:
        self._release.set()

    def __call__(self, handler: Any) -> None:
        with self._lock:
            self.held += 1
        self._release.wait(10)
        with self._lock:
            self.held -= 1
            self.answered += 1
        self._reply(handler)


_KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms")


@contextmanager
def request_id_proxy(upstream: str) -> Iterator[tuple[str, dict[str, bytes]]]:
    """A proxy to ``upstream`` that gives each answer an ``x-request-id``: yields its URL, and the
    request body sent under each id (filled in as requests come)."""
    issued: dict[str, bytes] = {}
    lock = threading.Lock()
    client = httpx.Client(base_url=upstream, timeout=10)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            answer = client.request(self.command, self.path, content=body, headers=headers)
            with lock:
                request_id = f"req-{len(issued)}"
                issued[request_id] = body
            self.send_response(answer.status_code)
            for name in _KEPT_HEADERS:
                if name in answer.headers:
                    self.send_header(name, answer.headers[name])
            self.send_header("x-request-id", request_id)
            self.send_header("content-length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", issued
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        client.close()
