"""Start and stop the external mock server (Stoplight Prism) the contract tests talk to."""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@contextmanager
def prism(spec: str, *args: str) -> Iterator[str]:
    """Run ``prism mock specs/<spec>`` on a free port and yield its URL; fail (never skip) if it can't."""
    if not PRISM.exists():
        pytest.fail(f"Prism is not installed at {PRISM.relative_to(ROOT)}: {INSTALL_HINT}", pytrace=False)
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
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not _accepts(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(
                        f"Prism did not start on {spec} (exit code {process.poll()}):\n{log.read()[-2000:]}",
                        pytrace=False,
                    )
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
