"""One limit for many processes: processes side by side against one sandbox enforcing a limit, sharing it
through a Redis store (``limit_store=``), each told the whole limit.

- 4 processes, each with a router of one route (sync, then async) told the limit: their combined rate
  should be the limit, with hardly a 429; without the store, the same run is about 4 times over.
- 2 processes running ``complete_many`` told a tokens-a-minute limit: the tokens they send a minute.
- 4 processes told no limit: they open and adapt together; the rate they reach and their 429s.
- A process killed mid-run: how long the others take to reach the whole limit again.
- ``redis-server`` stopped for a while mid-run: the time the run takes against one without the outage,
  and the fastest any process went meanwhile against its share.
- Calls to Redis a request, and the share of requests that waited on one, at ``shared_trips_rpm``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

from _stats import Figure, Row, Sizes
from shared_runs import Job, Outcome, Setup, kill, run

from wrapper.sandbox import Sandbox

__all__ = ["shared_rows"]

PROCESSES = 4


class _Redis:
    """A ``redis-server`` of the bench's, on a free port, saving nothing; ``stop()``/``start()`` on the
    same port make an outage."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError(
                "the shared-limit rows need redis-server on PATH (Debian's redis-server package)"
            )
        command = [
            executable,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            self._directory,
        ]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5) as ping,
            ):
                ping.sendall(b"PING\r\n")
                if ping.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait()
            self._process = None


@contextlib.contextmanager
def _redis() -> Iterator[_Redis]:
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        server = _Redis(directory)
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _limited(
    job: Job,
    processes: int,
    rpm: float | None = None,
    tpm: float | None = None,
    *,
    strict: bool = True,
    **setup: object,
) -> tuple[Outcome, int, int]:
    """(what the processes did, requests the sandbox saw, 429s it sent) of one run against a sandbox;
    a prompt that failed fails the row, unless not ``strict`` (the run without a store: 429s run out
    some prompts' retries)."""
    with Sandbox(rpm=rpm, tpm=tpm) as sandbox:
        outcome = run(Setup(_at(job, sandbox), processes, **setup))  # type: ignore[arg-type]
        stats = sandbox.stats()
    if strict and outcome.failures:
        raise RuntimeError(f"prompts failed: {dict(outcome.failures)}")
    return outcome, stats.requests, stats.rate_limited


def _at(job: Job, sandbox: Sandbox) -> Job:
    return dataclasses.replace(job, base_url=sandbox.scale_base_url)


def _rate_rows(name: str, rate: float, requests: int, limited: int, limit: float, unit: str) -> list[Row]:
    return [
        Row(f"{name}, rate", unit, Figure((rate,)), "set", Figure((limit,)), target=0.1, compare="within"),
        Row(
            f"{name}, 429s",
            "429s / requests",
            Figure((float(limited),)),
            "requests",
            Figure((float(requests),)),
            target=0.01,
            compare="share",
        ),
    ]


def _back_to_full(outcome: Outcome, killed: int, at: float, limit: float) -> float:
    """Seconds from ``at`` until the processes left first answer at 90% of ``limit`` over a second."""
    others = [i for i in range(len(outcome.answers)) if i != killed]
    step = 0.05
    start = at
    while start + 1 <= outcome.seconds:
        if outcome.rate(start, start + 1, others) >= 0.9 * limit:
            return start + 1 - at
        start += step
    return float("inf")


def shared_rows(sizes: Sizes) -> list[Row]:
    """The rows the module lists."""
    rpm, prompts = sizes.shared_rpm, sizes.shared_prompts
    each = prompts // PROCESSES
    rows: list[Row] = []
    with _redis() as redis:
        for kind in ("router", "async router"):
            job = Job(kind, "", each, 16, rpm, store=redis.url, key=f"bench {kind}")
            outcome, requests, limited = _limited(job, PROCESSES, rpm)
            name = (
                f"shared limit, {PROCESSES} processes x {kind} of 1 route: {rpm:,}/min; {prompts:,} prompts"
            )
            rows += _rate_rows(name, outcome.rate(), requests, limited, rpm, "completions/min")
        alone = Job("async router", "", each, 16, rpm)
        outcome, requests, limited = _limited(alone, PROCESSES, rpm, strict=False)
        name = f"no shared limit, {PROCESSES} processes x async router of 1 route: {rpm:,}/min each"
        failed = sum(outcome.failures.values())
        note = (
            f"each process keeps the whole limit: the sandbox's 429s slow them down; {failed} prompts failed"
        )
        rows += [
            Row(f"{name}, sent", "requests/min", Figure((requests * 60 / outcome.seconds,)), "the limit",
                Figure((float(rpm),)), target=None, note=note),
            Row(f"{name}, 429s", "429s / requests", Figure((float(limited),)), "requests",
                Figure((float(requests),)), target=None, compare="share"),
        ]  # fmt: skip

        tpm, max_tokens = sizes.shared_tpm, 16
        job = Job(
            "async batch",
            "",
            each // 2,
            16,
            None,
            tpm,
            store=redis.url,
            key="bench tokens",
            max_tokens=max_tokens,
        )
        outcome, requests, limited = _limited(job, 2, tpm=tpm)
        name = f"shared limit, 2 processes x complete_many: {tpm:,} tokens/min; {each:,} prompts"
        rows += _rate_rows(name, outcome.tokens * 60 / outcome.seconds, requests, limited, tpm, "tokens/min")

        limit, seconds = sizes.shared_adaptive_rpm, sizes.shared_adaptive_seconds
        adaptive = Job(
            "async router", "", limit * seconds // 60 // PROCESSES, 16, store=redis.url, key="bench adaptive"
        )
        outcome, requests, limited = _limited(adaptive, PROCESSES, limit)
        name = f"shared limit adaptive, {PROCESSES} processes, no limit given, the sandbox's {limit:,}/min"
        rows += [
            Row(f"{name}, rate", "completions/min", Figure((outcome.rate(),)), "server's limit",
                Figure((float(limit),)), target=0.85, compare="floor"),
            Row(f"{name}, 429s", "429s / requests", Figure((float(limited),)), "requests",
                Figure((float(requests),)), target=0.05, compare="share"),
        ]  # fmt: skip

        at = sizes.shared_event_at
        job = Job("async router", "", each, 16, rpm, store=redis.url, key="bench kill")
        outcome, _, _ = _limited(job, PROCESSES, rpm, events=[(at, kill(0))])
        rows.append(
            Row(
                f"shared limit, 1 of {PROCESSES} processes SIGKILLed at {at:g} s: the others at full rate",
                "s",
                Figure((_back_to_full(outcome, 0, at, rpm),)),
                "target",
                Figure((1.0,)),
                target=2.0,
            )
        )

        outage = sizes.shared_outage
        job = Job("async router", "", each, 16, rpm, store=redis.url, key="bench outage")
        steady, _, _ = _limited(job, PROCESSES, rpm)
        events = [(at, lambda _: redis.stop()), (at + outage, lambda _: redis.start())]
        job = Job("async router", "", each, 16, rpm, store=redis.url, key="bench outage 2")
        away, _, limited = _limited(job, PROCESSES, rpm, events=events)
        name = f"shared limit, redis-server stopped {outage:g} s mid-run"
        fastest = max(away.rate(at + 1, at + outage, [i]) for i in range(PROCESSES))
        rows += [
            Row(f"{name}, wall", "s", Figure((away.seconds,)), "without the outage",
                Figure((steady.seconds,)), target=1.15),
            Row(f"{name}, fastest process meanwhile", "completions/min", Figure((fastest,)), "its share",
                Figure((rpm / PROCESSES,)), target=1.1),
        ]  # fmt: skip

        trips_rpm = sizes.shared_trips_rpm
        job = Job("async router", "", each, 16, trips_rpm, store=redis.url, key="bench trips")
        outcome, _, _ = _limited(job, PROCESSES, trips_rpm)
        name = f"shared limit, {PROCESSES} processes at {trips_rpm:,}/min"
        rows += [
            Row(f"{name}: Redis calls a request", "calls", Figure((float(outcome.round_trips),)), "requests",
                Figure((float(outcome.completed),)), target=1.0),
            Row(f"{name}: requests that waited on Redis", "requests", Figure((float(outcome.waited),)),
                "requests", Figure((float(outcome.completed),)), target=0.05, compare="share"),
        ]  # fmt: skip
    return rows
