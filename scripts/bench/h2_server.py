"""The bench's HTTP/2 server: hypercorn over TLS, offering h2 and http/1.1, answering Scale's endpoint.

Run it in its own process: ``python scripts/bench/h2_server.py --tls DIR --delay 1 --cpu 1`` prints the
port it listens on, then serves until stdin closes. Every answer is held ``--delay`` seconds (an LLM's
latency); hypercorn allows 100 concurrent streams on an h2 connection, as servers commonly do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from _apis import PROMPT
from hypercorn.asyncio import serve
from hypercorn.config import Config

ANSWER = json.dumps({"completions": [[PROMPT, ["Paris"]]], "finish_reason": "stop"}).encode()


def app(delay: float) -> Any:
    async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await asyncio.sleep(delay)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": ANSWER})

    return answer


async def _serve(tls: Path, delay: float) -> None:
    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    print(listener.getsockname()[1], flush=True)
    config = Config()
    config.bind = [f"fd://{listener.detach()}"]  # hypercorn's now
    config.certfile, config.keyfile = str(tls / "cert.pem"), str(tls / "key.pem")
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = config.errorlog = None
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    await serve(app(delay), config, shutdown_trigger=lambda: stdin_closed)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tls", type=Path, required=True, help="DIR/cert.pem and DIR/key.pem")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to hold each answer")
    parser.add_argument("--cpu", help="comma-separated CPUs to pin the server to")
    args = parser.parse_args()
    if args.cpu and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpu.split(",")})
    asyncio.run(_serve(args.tls, args.delay))


if __name__ == "__main__":
    main()
