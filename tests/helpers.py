"""Test helpers shared by several test modules."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

__all__ = ["request_id_proxy"]

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
