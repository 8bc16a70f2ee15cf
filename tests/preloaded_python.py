"""A Python that has imported the package once and forks a fresh process for each script it runs.

``python script.py`` spends about 0.45 s of CPU importing the clients (they load aiohttp and httpx
as they are imported, ``load_ahead``, so that no client imports them inside an event loop), most of
what a short docs example costs. ``PreloadedPython`` starts this module as a program that imports
``PRELOADED`` and, with no thread running, forks a child for each script: the child takes the
caller's pipes as its stdin, stdout and stderr, its environment and working directory, and runs the
script as ``__main__``, as ``python script.py`` would, exiting as that would (its exit code, the
traceback of an uncaught exception, ``atexit``). A child starts from the parent's state, never from
an earlier child's: nothing one script does reaches the next.

Linux and macOS only (``os.fork``); the parent forks from its one thread, so forking is safe.
"""

from __future__ import annotations

import builtins
import gc
import importlib
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Any

PRELOADED = ("wrapper.scale", "wrapper.gradient", "wrapper.sandbox")
"""What every docs example imports, or most: the clients (with aiohttp and httpx) and the sandbox."""

FDS = 3  # a run's stdin, stdout and stderr, sent with its request


class PreloadedPython:
    """The parent process, which runs one script at a time (``run``); ``close`` ends it.

    ``env`` is the parent's environment: Python reads some of it as it starts (``PYTHONUNBUFFERED``,
    ``PYTHONWARNINGS``, ...), and the package as it is imported (``COMPLETION_CLIENTS_HTTP``), so a
    script's own environment should differ from it only in what is read after that.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

    def run(self, script: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``python script.py`` in ``script``'s directory with ``env``, its output captured as text, as
        ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)`` would, and like it
        waiting for the end of the output as well as for the process (a process the script left behind
        holding it open fails the timeout)."""
        out, out_w = os.pipe()
        err, err_w = os.pipe()
        request = json.dumps({"script": str(script), "env": env}).encode()
        with open(os.devnull, "rb") as stdin:
            socket.send_fds(self._channel, [request], [stdin.fileno(), out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        captured = {out: bytearray(), err: bytearray()}
        returncode = None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            try:
                pid = self._reply()
                for fd in (out, err, self._channel.fileno()):
                    selector.register(fd, selectors.EVENT_READ)
                while selector.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:  # as subprocess.run: kill it, wait for it, raise
                        if returncode is None:
                            os.kill(pid, signal.SIGKILL)
                            self._reply()
                        output = (bytes(captured[out]), bytes(captured[err]))
                        raise subprocess.TimeoutExpired(script.name, timeout, *output)
                    for key, _ in selector.select(left):
                        if key.fd == self._channel.fileno():
                            selector.unregister(key.fd)
                            returncode = self._reply()
                        elif data := os.read(key.fd, 1 << 16):
                            captured[key.fd] += data
                        else:
                            selector.unregister(key.fd)
            finally:
                for fd in captured:
                    os.close(fd)
        stdout, stderr = (_text(captured[fd]) for fd in (out, err))
        return subprocess.CompletedProcess(script.name, returncode, stdout, stderr)

    def _reply(self) -> int:
        """The parent's next reply: the pid of the child it forked, then its exit code."""
        reply = self._channel.recv(64)
        if not reply:
            raise RuntimeError(f"the preloaded Python exited: {self._stderr()}")
        return int(reply)

    def _stderr(self) -> str:
        self._process.wait(timeout=10)
        assert self._process.stderr is not None
        return self._process.stderr.read().decode(errors="replace")

    def close(self) -> None:
        """End the parent (it exits when the channel closes) and wait for it."""
        self._channel.close()
        try:
            self._process.wait(timeout=30)
        finally:
            self._process.kill()
            assert self._process.stderr is not None
            self._process.stderr.close()


def _text(data: bytearray) -> str:
    """As ``subprocess.run(text=True)`` decodes: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _serve(channel: socket.socket) -> dict[str, Any]:
    """Fork a child for each request and report its pid, then its exit code; return the request in the
    child. The parent exits when the channel closes."""
    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, FDS)
        if not message:
            sys.exit(0)
        if threading.active_count() != 1:
            raise RuntimeError(f"a thread runs in the preloaded Python: {threading.enumerate()}")
        pid = os.fork()
        if pid == 0:
            channel.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return dict(json.loads(message))
        for fd in fds:
            os.close(fd)
        channel.send(str(pid).encode())
        _, status = os.waitpid(pid, 0)
        channel.send(str(os.waitstatus_to_exitcode(status)).encode())


def _run_as_main(script: str) -> None:
    """Run ``script`` as ``python script.py`` runs it: a fresh ``__main__`` module, ``sys.argv`` and
    ``sys.path[0]`` its own, in its directory."""
    path = os.path.abspath(script)
    directory = os.path.dirname(path)
    os.chdir(directory)
    sys.argv = [os.path.basename(path)]
    sys.path.insert(0, directory)
    main = types.ModuleType("__main__")
    main.__dict__.update(
        __file__=path, __cached__=None, __loader__=SourceFileLoader("__main__", path),
        __builtins__=builtins, __annotations__={},
    )  # fmt: skip
    sys.modules["__main__"] = main
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec", dont_inherit=True)
    exec(code, main.__dict__)


if __name__ == "__main__":
    del sys.path[0]  # this file's directory: a script's own goes there
    for name in PRELOADED:
        importlib.import_module(name)
    # What is loaded is never garbage: out of the collector's sight, a child's collections (and its
    # exit's) neither walk it nor write to its pages (0.2 s of CPU a child without it, 0.05 with it).
    gc.freeze()
    request = _serve(socket.socket(fileno=int(sys.argv[1])))
    os.environ.clear()
    os.environ.update(request["env"])
    _run_as_main(request["script"])
