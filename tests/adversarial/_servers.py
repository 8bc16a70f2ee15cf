"""Start and stop the external mock server (Stoplight Prism) the contract tests talk to."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRISM = ROOT / "node_modules" / ".bin" / "prism"
INSTALL_HINT = "install it from the lockfile with `npm ci --no-audit --no-fund` at the repository root"
STARTUP_TIMEOUT = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _started(process: subprocess.Popen[bytes], log: IO[str]) -> bool:
    """Wait until Prism says it listens (True), or exits or takes too long (False)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        log.seek(0)
        if "Prism is listening" in log.read():
            return True
        time.sleep(0.05)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def prism(spec: str, *args: str) -> Iterator[str]:
    """Run ``prism mock specs/<spec>`` on a free port and yield its URL; fail (never skip) if it can't."""
    if not PRISM.exists():
        pytest.fail(f"Prism is not installed at {PRISM.relative_to(ROOT)}: {INSTALL_HINT}", pytrace=False)
    logs = []
    for _ in range(3):  # another process may take the port between our choosing it and Prism binding it
        port = free_port()
        command = [
            str(PRISM),
            "mock",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            *args,
            str(ROOT / "specs" / spec),
        ]
        with tempfile.TemporaryFile("a+") as log:  # O_APPEND: Prism writes at the end whatever we read
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            try:
                if _started(process, log):
                    yield f"http://127.0.0.1:{port}"
                    return
            finally:
                _stop(process)
            log.seek(0)
            logs.append(f"exit code {process.returncode}:\n{log.read()[-2000:]}")
    pytest.fail(f"Prism did not start on {spec}:\n" + "\n".join(logs), pytrace=False)
