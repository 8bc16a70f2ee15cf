"""Fan-out: every prompt to each of several targets in one batch, one result per (prompt, target).

A target is a ``complete(prompt, **kwargs)`` that paces itself, as a router's does: ``Router.fan_out``
gives each of its routes as one (``wrapper.router``), so each target keeps its own limits. The batch
runs as ``complete_with`` does, over a job per (prompt, target): the prompts are read once, lazily, and
each result names its ``target``; ``concurrency`` bounds the requests in flight over all targets.
``afan_out_jobs`` takes those jobs as they are (``TargetJob``), so that a resumed run sends a prompt
to the targets that have not answered it only.
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any

from wrapper import Completion
from wrapper.errors import APIError

from ._budget import Budget
from ._run import (
    AsyncBatchIterator,
    BatchIterator,
    BatchResult,
    Job,
    Send,
    _arun,
    _Batch,
    _check_arguments,
    _Counted,
    _jobs,
    _numbered,
    _routed,
    _run,
)

__all__ = ["TargetJob", "afan_out_jobs", "afan_out_with", "fan_out_with"]

TargetJob = tuple[int, str, str, Mapping[str, Any]]
"""One prompt for one target: the index its result carries, the target's name, the prompt, and the
keyword arguments for its ``complete``."""


def fan_out_with(
    completes: Mapping[str, Callable[..., Completion]],
    prompts: Iterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    budget: Budget | None = None,
    **kwargs: Any,
) -> BatchIterator:
    """Every prompt to each target, ``completes[name](prompt, **kwargs)``: a result per (prompt, target),
    ``BatchResult.target`` naming it, as ``complete_with`` runs a batch otherwise (``ordered``: by
    prompt, then in the targets' order). ``.stats.routes`` has each target's figures."""
    batch = _FanOut(completes, budget)
    _check_arguments(prompts, concurrency, budget)
    jobs = _fanned(_numbered(prompts, kwargs), batch.names)
    return BatchIterator(_run(batch, jobs, concurrency, ordered, return_exceptions), batch.tally)


def afan_out_with(
    completes: Mapping[str, Callable[..., Awaitable[Completion]]],
    prompts: Iterable[str] | AsyncIterable[str],
    *,
    concurrency: int = 16,
    ordered: bool = False,
    return_exceptions: bool = False,
    budget: Budget | None = None,
    **kwargs: Any,
) -> AsyncBatchIterator:
    """The async ``fan_out_with``: prompts from an iterable or an async iterable, ``async for`` the
    results."""
    batch = _FanOut(completes, budget)
    _check_arguments(prompts, concurrency, budget)
    prompt_jobs = _jobs(prompts, kwargs)
    if isinstance(prompt_jobs, AsyncGenerator):
        jobs: Iterator[Job] | AsyncGenerator[Job, None] = _afanned(prompt_jobs, batch.names)
    else:
        jobs = _fanned(prompt_jobs, batch.names)
    return AsyncBatchIterator(_arun(batch, jobs, concurrency, ordered, return_exceptions), batch.tally)


def afan_out_jobs(
    completes: Mapping[str, Callable[..., Awaitable[Completion]]],
    jobs: Iterable[TargetJob],
    *,
    concurrency: int,
    ordered: bool = False,
    return_exceptions: bool = False,
    budget: Budget | None = None,
) -> AsyncBatchIterator:
    """A fan-out's jobs as they are, each a prompt for one target with its own index and parameters
    (the command line's fan-out, which leaves out the targets that already answered a prompt)."""
    batch = _FanOut(completes, budget)
    _check_arguments(jobs, concurrency, budget)
    numbered = (batch.job(job) for job in jobs)
    return AsyncBatchIterator(_arun(batch, numbered, concurrency, ordered, return_exceptions), batch.tally)


class _FanOut(_Batch):
    """A batch whose job number ``index * targets + t`` goes to target ``t``."""

    def __init__(self, completes: Mapping[str, Callable[..., Any]], budget: Budget | None) -> None:
        if not isinstance(completes, Mapping) or not completes:
            raise TypeError("completes must be a non-empty mapping of target names to complete functions")
        for name, complete in completes.items():
            if not isinstance(name, str) or not callable(complete):
                raise TypeError(f"completes must map names (strings) to complete functions; got {name!r}")
        self.names = list(completes)
        self.sends = [_routed(complete) for complete in completes.values()]
        self._numbers = {name: number for number, name in enumerate(self.names)}
        super().__init__(self.sends[0], _Counted, budget, cached=True)

    def job(self, job: TargetJob) -> Job:
        """A target's job as this batch numbers it."""
        index, target, prompt, params = job
        number = self._numbers.get(target)
        if number is None:
            raise ValueError(f"job {index}: no target is named {target!r}; the targets are {self.names}")
        return index * len(self.names) + number, prompt, params

    def sender(self, job: Job) -> Send:
        return self.sends[self.target(job)]

    def target(self, job: Job) -> int:
        return job[0] % len(self.names)

    def result(
        self, index: int, completion: Completion | None = None, error: APIError | None = None
    ) -> BatchResult:
        index, target = divmod(index, len(self.names))
        return BatchResult(index, completion, error, target=self.names[target])


def _one(job: Job, targets: int) -> Iterator[Job]:
    index, prompt, params = job
    if not isinstance(prompt, str):
        raise TypeError(f"prompts must be strings, got {type(prompt).__name__} at index {index}")
    return ((index * targets + target, prompt, params) for target in range(targets))


def _fanned(jobs: Iterator[Job], names: list[str]) -> Generator[Job, None, None]:
    for job in jobs:
        yield from _one(job, len(names))


async def _afanned(jobs: AsyncGenerator[Job, None], names: list[str]) -> AsyncGenerator[Job, None]:
    try:
        async for job in jobs:
            for fanned in _one(job, len(names)):
                yield fanned
    finally:
        await jobs.aclose()
