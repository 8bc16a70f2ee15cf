"""The benchmark's HTTP/1.1 keep-alive server: both APIs answered with fixed, pre-encoded bodies.

An asyncio protocol (no framework, no per-request objects) so that the server costs a few
microseconds a request and is never what the clients wait on. Run it in its own process:
``python scripts/bench/server.py --chunks 5000 --cpu 1`` prints the port it listens on, then serves
until stdin closes (so it never outlives the process that started it).

- ``POST .../completions`` (Scale): a ``CompletionResponse``; with ``"stream": true`` in the body,
  an SSE stream of ``--chunks`` events, one HTTP chunk each, the last carrying the token counts.
- ``POST .../complete`` (Gradient): a ``CompleteModelSuccess``.

``--delay SECONDS`` holds every answer that long (an LLM's latency), without blocking other requests;
``GET /in-flight`` then answers the most requests held at once since the last ``GET /in-flight``.
``--tls DIR`` serves HTTPS with ``DIR/cert.pem`` and ``DIR/key.pem`` (HTTP/1.1 alone: no ALPN).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from _apis import PROMPT

__all__ = ["Server", "serve", "serve_h2", "split_cpus"]

OUTPUT = "The capital of France is Paris, a city on the Seine known for its museums and cafes."
STREAM_TEXT = "tok "
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_STREAM_FLAG = re.compile(rb'"stream"\s*:\s*true')


def _response(body: bytes, content_type: bytes = b"application/json") -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n" % (content_type, len(body))
    return head + body


def _event_stream(chunks: int) -> bytes:
    """``chunks`` SSE events, each in its own HTTP chunk, as one pre-encoded chunked response."""
    middle = json.dumps({"completions": [[PROMPT, [STREAM_TEXT]]]}, separators=(",", ":"))
    last = json.dumps(
        {
            "completions": [[PROMPT, [STREAM_TEXT]]],
            "finish_reason": "length",
            "prompt_tokens": 7,
            "response_tokens": chunks,
        },
        separators=(",", ":"),
    )
    parts = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"]
    for data in [middle] * (chunks - 1) + [last]:
        event = b"data: %s\n\n" % data.encode()
        parts.append(b"%x\r\n%s\r\n" % (len(event), event))
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


class _Answers:
    """Every response the server sends, encoded once at start-up."""

    def __init__(self, chunks: int) -> None:
        self.scale = _response(
            json.dumps(
                {
                    "completions": [[PROMPT, [OUTPUT]]],
                    "finish_reason": "stop",
                    "prompt_tokens": 7,
                    "response_tokens": 19,
                }
            ).encode()
        )
        self.scale_stream = _event_stream(chunks)
        self.gradient = _response(json.dumps({"finishReason": "stop", "generatedOutput": OUTPUT}).encode())
        self.not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"

    def to(self, head: bytes, body: bytes) -> bytes:
        path = head.split(b" ", 2)[1].split(b"?", 1)[0]
        if path.endswith(b"/completions"):
            return self.scale_stream if _STREAM_FLAG.search(body) else self.scale
        if path.endswith(b"/complete"):
            return self.gradient
        return self.not_found


class _Held:
    """The requests held for ``--delay`` now, and the most held at once since last asked."""

    def __init__(self) -> None:
        self.now = self.peak = 0

    def hold(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def release(self, transport: asyncio.Transport, answer: bytes) -> None:
        self.now -= 1
        transport.write(answer)

    def report(self) -> bytes:
        """The peak as a JSON response; the count starts again from the requests held now."""
        body, self.peak = json.dumps({"max_in_flight": self.peak}).encode(), self.now
        return _response(body)


class _Connection(asyncio.Protocol):
    """One keep-alive connection: split the byte stream into requests, answer each in order."""

    def __init__(self, answers: _Answers, delay: float, held: _Held) -> None:
        self._answers = answers
        self._delay = delay
        self._held = held
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while (end := buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(buffer[:end])
            match = _CONTENT_LENGTH.search(head)
            total = end + 4 + (int(match[1]) if match else 0)
            if len(buffer) < total:
                return
            body = bytes(buffer[end + 4 : total])
            del buffer[:total]
            assert self._transport is not None
            if head.startswith(b"GET /in-flight "):
                self._transport.write(self._held.report())
            elif self._delay:
                self._held.hold()
                answer = self._answers.to(head, body)
                asyncio.get_running_loop().call_later(
                    self._delay, self._held.release, self._transport, answer
                )
            else:
                self._transport.write(self._answers.to(head, body))


async def _serve(chunks: int, port: int, delay: float, tls: Path | None) -> None:
    loop = asyncio.get_running_loop()
    answers, held = _Answers(chunks), _Held()
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls / "cert.pem", tls / "key.pem")
    server = await loop.create_server(
        lambda: _Connection(answers, delay, held), "127.0.0.1", port, backlog=4096, ssl=context
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    async with server:
        await stdin_closed


class Server:
    """A running server process: ``url``, ``pid``, and its CPU seconds so far (Linux ``/proc``)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, scheme: str = "http") -> None:
        self.process = process
        self.url = f"{scheme}://127.0.0.1:{port}"

    def cpu_seconds(self) -> float | None:
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def split_cpus() -> tuple[set[int] | None, set[int] | None]:
    """(client CPUs, server CPU): the last CPU for the server, the rest for the client; None if only one."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return set(cpus[:-1]), {cpus[-1]}


@contextlib.contextmanager
def serve(
    chunks: int, cpu: set[int] | None = None, delay: float = 0.0, tls: Path | None = None
) -> Iterator[Server]:
    """Start the server in a child process (pinned to ``cpu`` when given; over TLS with the certificate
    in ``tls``) and stop it on exit."""
    command = [sys.executable, __file__, "--chunks", str(chunks), "--delay", str(delay)]
    if tls is not None:
        command += ["--tls", str(tls)]
    with _started(command, cpu, "https" if tls is not None else "http") as server:
        yield server


@contextlib.contextmanager
def serve_h2(tls: Path, cpu: set[int] | None = None, delay: float = 0.0) -> Iterator[Server]:
    """Start ``h2_server.py`` (hypercorn over TLS, h2 and http/1.1) as ``serve`` starts this server."""
    command = [sys.executable, str(Path(__file__).with_name("h2_server.py")), "--tls", str(tls)]
    with _started([*command, "--delay", str(delay)], cpu, "https") as server:
        yield server


@contextlib.contextmanager
def _started(command: list[str], cpu: set[int] | None, scheme: str) -> Iterator[Server]:
    """``command`` in a child process that prints its port, then serves until its stdin closes."""
    if cpu:
        command = [*command, "--cpu", ",".join(map(str, sorted(cpu)))]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline() or 0)
        if not port:
            raise RuntimeError("the bench server did not start")
        yield Server(process, port, scheme)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=5000, help="events in a Scale stream")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cpu", help="comma-separated CPUs to pin the server to")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to hold each answer")
    parser.add_argument("--tls", type=Path, help="serve HTTPS with DIR/cert.pem and DIR/key.pem")
    args = parser.parse_args()
    if args.cpu and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpu.split(",")})
    asyncio.run(_serve(args.chunks, args.port, args.delay, args.tls))


if __name__ == "__main__":
    main()
