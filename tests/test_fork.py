"""After ``os.fork()`` every process gets its own answers: a child never uses a connection of its parent.

A parent that has used its client (its pool holds a keep-alive connection) forks, round after round;
parent and child then call at once, each with prompts of its own, on a loopback server that answers
with the prompt it was asked. Were they to share the inherited connection, one would read the
other's answer, or the two requests would be interleaved on one socket. The forking runs in a fresh
interpreter (warnings as errors), so the test process itself never forks with its server threads.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from helpers import ENV_VARS, LocalServer, echo_reply

pytestmark = [
    pytest.mark.usefixtures("library"),  # every test on httpx and on httpx2
    pytest.mark.long("parallel"),  # 100-119 s of one process in make test
]

ROUNDS = 10  # each a fresh fork from a parent whose pool holds a connection it has just used
THREADED_FORK = "ignore:This process:DeprecationWarning"
"""Python 3.12+ warns on a fork while asyncio's resolver thread (httpx's pool looks up even an IP) lives."""

FORKS = """
import asyncio, os, sys
import wrapper
import wrapper.scale as sgp
from wrapper.scale import AsyncScale, Scale

mode, rounds = sys.argv[1], int(sys.argv[2])


def wrong_sync(client, who):
    \"\"\"The prompts sent by `who` whose answer (completed, then streamed) was not that prompt.\"\"\"
    wrong = []
    for i in range(3):
        prompt = f"{who} call {i}"
        if client.complete("m", prompt).text != prompt:
            wrong.append(prompt)
        if "".join(client.stream("m", prompt).text_stream) != prompt:
            wrong.append(prompt + " (streamed)")
    return wrong


async def wrong_async(client, who):
    wrong = []
    for i in range(3):
        prompt = f"{who} call {i}"
        if (await client.complete("m", prompt)).text != prompt:
            wrong.append(prompt)
        if "".join([piece async for piece in client.stream("m", prompt).text_stream]) != prompt:
            wrong.append(prompt + " (streamed)")
    return wrong


if mode == "sync-DefaultHttpxClient":  # DefaultHttpx2Client on httpx2
    on_httpx2 = os.environ.get("COMPLETION_CLIENTS_HTTP") == "httpx2"
    client = Scale(http_client=(wrapper.DefaultHttpx2Client if on_httpx2 else wrapper.DefaultHttpxClient)())
    in_parent = in_child = lambda who: wrong_sync(client, who)
    close = client.close
elif mode.startswith("sync"):
    in_parent = in_child = lambda who: wrong_sync(sgp, who)  # the module's default client
    close = lambda: None  # closed at exit
else:
    client = AsyncScale()
    loop = asyncio.new_event_loop()  # the parent's loop, and its pool, stay open across the forks
    in_parent = lambda who: loop.run_until_complete(wrong_async(client, who))
    in_child = lambda who: asyncio.run(wrong_async(client, who))  # a loop can't cross a fork
    close = lambda: None  # the child's pool closes with its loop

assert in_parent("warm-up") == []
wrong = []
for round in range(rounds):
    pid = os.fork()
    if pid == 0:
        wrong = in_child(f"child {round}")
        close()
        print(*wrong, sep="\\n")
        sys.exit(len(wrong))  # a normal exit: the parent's atexit hooks run in the child too
    wrong += in_parent(f"parent {round}")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        wrong.append(f"child {round} exited with {os.waitstatus_to_exitcode(status)}")
if mode.startswith("sync"):
    close()
else:
    loop.run_until_complete(client.close())
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
print(*wrong, sep="\\n")
sys.exit(len(wrong))
"""


@pytest.fixture
def served(mode: str, tmp_path: Path) -> Iterator[tuple[LocalServer, dict[str, str]]]:
    """The echoing server (over TLS for a ``-tls`` mode) and the environment its clients need."""
    server = LocalServer()
    env = {"SGP_CLIENT_BASE_URL": server.url}
    if mode.endswith("-tls"):
        ca = trustme.CA()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        server._server.socket = context.wrap_socket(server._server.socket, server_side=True)
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        env = {
            "SGP_CLIENT_BASE_URL": server.url.replace("http://", "https://"),
            "SSL_CERT_FILE": str(tmp_path / "ca.pem"),
        }
    server.script(echo_reply)
    server.start()
    try:
        yield server, env
    finally:
        server.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")
@pytest.mark.parametrize(
    "mode",
    [
        "sync",  # the checkout pool
        "sync-tls",  # closing an inherited TLS connection in the child sends nothing on it
        "sync-httpx-pool",  # httpx's own pool, which a sync client uses when a proxy is configured
        "sync-DefaultHttpxClient",  # given as http_client: its checkout pool drops the parent's connections
        "aiohttp",
        "aiohttp-tls",
        "async-httpx-pool",  # the async client's own httpx pool (used when a proxy is configured)
    ],
)
def test_parent_and_child_each_get_their_own_answers(
    served: tuple[LocalServer, dict[str, str]], mode: str
) -> None:
    server, server_env = served
    env = {name: value for name, value in os.environ.items() if name not in ENV_VARS}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        env.pop(name, None)
        env.pop(name.lower(), None)
    env.update(SGP_API_KEY="sk-test-key", SGP_ACCOUNT_ID="acct", **server_env)
    if mode.endswith("httpx-pool"):
        # A proxy in the environment makes the client use httpx's pool; NO_PROXY sends loopback direct.
        env.update(HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1")
    out = subprocess.run(
        [sys.executable, "-W", "error", "-W", THREADED_FORK, "-c", textwrap.dedent(FORKS), mode, str(ROUNDS)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, f"answers crossed or failed:\n{out.stdout}\n{out.stderr}"
    assert out.stderr == ""
    calls = [(body["prompt"], bool(body.get("stream"))) for _, _, _, body in server.requests]
    assert len(calls) == len(set(calls)), "a call was retried: a connection failed"
    children = {prompt.split(" call ")[0] for prompt, _ in calls if prompt.startswith("child")}
    assert children == {f"child {round}" for round in range(ROUNDS)}
