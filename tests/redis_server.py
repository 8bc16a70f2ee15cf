"""A real ``redis-server`` for the tests that share state through Redis: started here, never faked.

``RedisServer`` runs Debian's ``redis-server`` on a loopback port of its own, with nothing saved to
disk, in a temporary directory; ``stop()`` and ``start()`` take it away and bring it back on the same
port (an outage, as a process using it sees one), ``kill()`` ends it at once, ``pause()`` and
``resume()`` freeze it and let it go on (a server that does not answer). The ``redis_server``
fixture gives one per test module (``--dist loadfile`` keeps a module in one process), emptied before
each test that asks for ``redis_url``.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["RedisServer", "redis_server", "redis_url"]

MISSING = (
    "redis-server is not on PATH: the tests of the Redis stores start a real one. Install Debian's "
    "package (`apt-get install redis-server`; .ci/run does it when it is missing) or your system's"
)


class RedisServer:
    """One ``redis-server`` on 127.0.0.1, on a port the OS picked free."""

    def __init__(self, directory: Path) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError(MISSING)
        self._executable = executable
        self._directory = directory
        self.port = 0  # chosen by the first start
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers."""
        if self.port:
            self._start()
            return
        for attempt in range(5):  # another process may take a free port before redis-server binds it
            self.port = _free_port()
            try:
                self._start()
                return
            except RuntimeError:
                if attempt == 4:
                    raise

    def _start(self) -> None:
        settings = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "save": "",
            "appendonly": "no",
            "dir": str(self._directory),
            "logfile": str(self._directory / "redis.log"),
        }
        arguments = [word for name, value in settings.items() for word in (f"--{name}", value)]
        self._process = subprocess.Popen(
            [self._executable, *arguments],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = (self._directory / "redis.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}: {log}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Shut it down and wait for it to be gone."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def kill(self) -> None:
        """End it at once (SIGKILL), as a crash would."""
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def pause(self) -> None:
        """Freeze it (SIGSTOP): it keeps its connections and answers none, as a server stuck or far away."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a frozen server go on (SIGCONT; nothing if it is not running)."""
        if self._process is not None:
            self._process.send_signal(signal.SIGCONT)

    def flush(self) -> None:
        """Empty every database."""
        self._command(b"*1\r\n$8\r\nFLUSHALL\r\n")

    def answers(self) -> bool:
        """True when it is up and answers PING."""
        try:
            return self._command(b"*1\r\n$4\r\nPING\r\n").startswith(b"+PONG")
        except OSError:
            return False

    def _command(self, command: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as connection:
            connection.sendall(command)
            return connection.recv(64)


def _free_port() -> int:
    """A port below Linux's ephemeral range (32768 up), which the OS gives to outgoing connections and to
    servers on port 0: none of those takes it while the server is stopped for an outage."""
    while True:
        port = random.randrange(20000, 32768)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A ``redis-server`` for the test module, stopped after it."""
    with tempfile.TemporaryDirectory(prefix="redis-") as directory:
        server = RedisServer(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The module's ``redis-server``, running and emptied, as a ``redis://`` URL."""
    redis_server.resume()  # a test before this one may have frozen it
    if not redis_server.answers():
        redis_server.start()  # or stopped it
    redis_server.flush()
    yield redis_server.url
    with contextlib.suppress(OSError):
        redis_server.flush()
