"""Processes side by side against one sandbox, each pacing to the same limit, with or without a shared
limit store: what the bench's shared-limit rows and the suite's tests of them measure.

``run(Setup(...))`` starts ``processes`` copies of this file (each a ``Job``: a client in a router of one
route or in a ``complete_many`` batch, sync or async), waits until every one is ready, lets them all go
at once, does each of ``events`` at its time after that (stop Redis, kill a process, ...), and returns
what each did (``Outcome``): when each answer came, the failures, its calls to the store. Run as a
script, this file is one of those processes: its job as JSON in its argument, ``go`` on stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["KINDS", "Job", "Outcome", "Setup", "run"]

KINDS = ("router", "async router", "batch", "async batch")
"""How a process sends: a ``Router``/``AsyncRouter`` of one route, or a client's ``complete_many``."""
MODEL = "llama-3-8b-instruct"


@dataclasses.dataclass(frozen=True)
class Job:
    """What one process does: ``requests`` completions of ``max_tokens`` each, ``concurrency`` at once,
    paced to the limits, sharing them through ``store`` (a Redis URL; None: pacing alone)."""

    kind: str
    base_url: str
    requests: int
    concurrency: int
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    store: str | None = None
    key: str | None = None
    max_tokens: int = 1
    prompt: str = "Alice was"


@dataclasses.dataclass(frozen=True)
class Setup:
    """``processes`` copies of ``job``, and what to do while they run: ``(seconds after they go, action)``;
    an action gets the processes (to kill one, say)."""

    job: Job
    processes: int
    events: Sequence[tuple[float, Callable[[list[subprocess.Popen[str]]], None]]] = ()


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the processes did: each one's answer times (seconds after they went; None for a process
    that was killed), failures by error class, and calls to the store and requests that waited on one."""

    answers: list[list[float] | None]
    tokens: int  # the prompt and response tokens of every answer
    failures: Counter[str]
    round_trips: int
    waited: int
    seconds: float  # from the go to the last answer

    @property
    def completed(self) -> int:
        return sum(len(times) for times in self.answers if times is not None)

    def rate(self, start: float = 0.0, end: float | None = None, which: Sequence[int] | None = None) -> float:
        """Answers a minute, of the processes ``which`` (all), from ``start`` to ``end`` (the last)."""
        end = self.seconds if end is None else end
        chosen = [self.answers[i] for i in (which if which is not None else range(len(self.answers)))]
        count = sum(start <= t < end for times in chosen if times is not None for t in times)
        return count * 60 / (end - start)


def run(setup: Setup, timeout: float = 600) -> Outcome:
    """Run the processes of ``setup`` to the end (a killed one ends there)."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    job = json.dumps(dataclasses.asdict(setup.job))
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, job], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(setup.processes)
    ]
    try:
        for process in processes:  # each has imported everything and built its client
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a process of the run did not start: exit code {process.wait()}")
        went = time.time()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(f"{went!r}\n")
            process.stdin.flush()
        events = threading.Thread(target=_events, args=(setup.events, went, processes), daemon=True)
        events.start()
        reports = [_report(process, went + timeout) for process in processes]
        events.join(timeout)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):  # a killed process's stdin: a broken pipe
                        pipe.close()
    done = [r for r in reports if r is not None]
    answers = [None if r is None else [t - went for t in r["answers"]] for r in reports]
    return Outcome(
        answers=answers,
        tokens=sum(r["tokens"] for r in done),
        failures=sum((Counter(r["failures"]) for r in done), Counter()),
        round_trips=sum(r["round_trips"] for r in done),
        waited=sum(r["waited"] for r in done),
        seconds=max((max(times) for times in answers if times), default=0.0),
    )


def _events(events: Sequence[tuple[float, Callable[..., None]]], went: float, processes: list[Any]) -> None:
    for at, action in sorted(events, key=lambda event: event[0]):
        time.sleep(max(went + at - time.time(), 0))
        action(processes)


def _report(process: subprocess.Popen[str], deadline: float) -> dict[str, Any] | None:
    """What a process printed at its end, or None if it ended without (killed)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    process.wait(max(deadline - time.time(), 1))
    return json.loads(line) if line.strip() else None


def kill(index: int) -> Callable[[list[subprocess.Popen[str]]], None]:
    """An event: SIGKILL the process ``index``."""
    return lambda processes: processes[index].send_signal(signal.SIGKILL)


# One process of a run.


def _main(job: Job) -> None:
    from wrapper.pacing import RedisStore
    from wrapper.scale import AsyncScale, Scale

    sync = not job.kind.startswith("async")
    client = (Scale if sync else AsyncScale)(api_key="key", base_url=job.base_url, timeout=30, max_retries=20)
    results = _batch(client, job) if sync else _abatch(client, job)  # nothing is sent before the go
    answers: list[float] = []
    tokens = 0
    failures: Counter[str] = Counter()

    def record(result: Any) -> None:
        nonlocal tokens
        if result.ok:
            answers.append(time.time())
            tokens += (result.completion.prompt_tokens or 0) + (result.completion.response_tokens or 0)
        else:
            failures[type(result.error).__name__] += 1

    async def main() -> None:
        async for result in results:
            record(result)

    print("ready", flush=True)
    went = float(sys.stdin.readline())
    if sync:
        for result in results:
            record(result)
    else:
        asyncio.run(main())
    store = RedisStore.of(job.store) if job.store else None
    print(json.dumps({
        "answers": answers,
        "tokens": tokens,
        "failures": failures,
        "round_trips": store.round_trips if store else 0,
        "waited": store.waited if store else 0,
        "went": went,
    }), flush=True)  # fmt: skip


def _limits(job: Job) -> dict[str, Any]:
    return {"requests_per_minute": job.requests_per_minute, "tokens_per_minute": job.tokens_per_minute}


def _batch(client: Any, job: Job) -> Any:
    prompts = [job.prompt] * job.requests
    options = {"concurrency": job.concurrency, "return_exceptions": True, "max_tokens": job.max_tokens}
    if job.kind == "router":
        from wrapper import Route, Router

        router = Router([Route(client, MODEL, **_limits(job), limit_store=job.store, limit_key=job.key)])
        return router.complete_many(prompts, **options)
    return client.complete_many(
        MODEL, prompts, **options, **_limits(job), limit_store=job.store, limit_key=job.key
    )


def _abatch(client: Any, job: Job) -> Any:
    prompts = [job.prompt] * job.requests
    options = {"concurrency": job.concurrency, "return_exceptions": True, "max_tokens": job.max_tokens}
    if job.kind == "async router":
        from wrapper import AsyncRouter, Route

        router = AsyncRouter([Route(client, MODEL, **_limits(job), limit_store=job.store, limit_key=job.key)])
        return router.complete_many(prompts, **options)
    if job.kind == "async jobs":  # the store's pacer as the batch's limiter
        from wrapper.batch import acomplete_jobs
        from wrapper.pacing import RedisStore

        assert job.store is not None
        assert job.key is not None
        limiter = RedisStore.of(job.store).pacer(job.key, job.requests_per_minute, job.tokens_per_minute)
        jobs = ((i, job.prompt, {"max_tokens": job.max_tokens}) for i in range(job.requests))
        return acomplete_jobs(
            client, MODEL, jobs, concurrency=job.concurrency, return_exceptions=True, limiter=limiter
        )
    return client.complete_many(
        MODEL, prompts, **options, **_limits(job), limit_store=job.store, limit_key=job.key
    )


if __name__ == "__main__":
    _main(Job(**json.loads(sys.argv[1])))
