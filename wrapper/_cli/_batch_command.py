"""``python -m wrapper batch``: prompts from a JSONL file through a batch into a resumable results file.

A run sends each input line to its target (one model, or the routes of a router), or in a fan-out to
each of its targets, skipping what the output already holds; it ends with a summary (``_summary``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from wrapper.batch import Budget, Job, TargetJob, acomplete_jobs, error_fields

from ._inputs import STDIO, Id, Line, input_size, named, read_lines
from ._progress import progress
from ._record import Run, refused_fingerprint
from ._results import ResultFile, StandardOutput
from ._summary import Outcome, print_summary, write_summary

if TYPE_CHECKING:
    from collections.abc import Callable

    from wrapper import AsyncBatchIterator, AsyncClient, AsyncRouter, BatchResult

__all__ = ["BUDGET_REACHED", "REFUSALS_TO_STOP", "Batch", "describe", "run_batch"]

REFUSALS_TO_STOP = 5
"""A batch whose first this many answers (or all of them, if fewer) are 401, 403 or 404 stops: a wrong
credential or model would refuse every prompt. It sends no more prompts (those in flight are answered)
and writes none of those refusals, so that the same command, once the cause is fixed, sends them again."""
_REFUSED = (401, 403, 404)
BUDGET_REACHED = 3
"""The exit code of a batch that stopped at its budget: the same command with a higher cap goes on."""
INTERRUPTED = 130


def describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' ({status})' if status else ''}: {exc}"


@attrs.frozen
class Batch:
    """How the command runs: the run (its targets), the client (for one model) or the async router (for
    routes and fan-outs), and the batch's settings."""

    run: Run
    client: AsyncClient | AsyncRouter
    concurrency: int
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    limit_store: str | None = None
    limit_key: str | None = None
    budget_requests: int | None = None
    budget_tokens: int | None = None

    def start(self, jobs: Generator[TargetJob, None, None], budget: Budget | None) -> AsyncBatchIterator:
        """The batch over ``jobs`` (a fan-out's as they are; the others' without their target)."""
        if self.run.mode == "fan-out":
            from wrapper.router import AsyncRouter

            assert isinstance(self.client, AsyncRouter)  # a fan-out's targets are a router's routes
            return self.client.fan_out_jobs(
                jobs, concurrency=self.concurrency, return_exceptions=True, budget=budget
            )
        untargeted: Generator[Job, None, None] = (
            (index, prompt, params) for index, _, prompt, params in jobs
        )
        model = None if self.run.mode == "routes" else self.run.targets[0].model  # None: a router's routes
        return acomplete_jobs(
            self.client,
            model,
            untargeted,
            concurrency=self.concurrency,
            return_exceptions=True,
            requests_per_minute=self.requests_per_minute,
            tokens_per_minute=self.tokens_per_minute,
            limit_store=self.limit_store,
            limit_key=self.limit_key,
            budget=budget,
        )


async def run_batch(
    batch: Batch,
    input_path: str,
    output_path: str,
    *,
    check: Callable[[dict[str, Any], str], None],
    show_progress: bool | None,
    retry_failed: bool = False,
    allow_changes: bool = False,
    summary_path: str | None = None,
    stderr: TextIO | None = None,
    command: str | None = None,
) -> int:
    """Complete every input (for each target) not yet in the output, appending a result line each; return
    the exit code: 0 all done, 1 some failed (or the batch stopped at refusals), 3 stopped at its budget,
    130 interrupted.

    ``-`` is standard input as ``input_path``, standard output as ``output_path`` (which then keeps
    nothing to resume from). ``retry_failed`` first removes the output's error results, so that their
    inputs are sent again; ``allow_changes`` lets the output hold another run's results. ``command`` (this
    run's command line, secrets masked) is what the summary suggests re-running with ``--retry-failed``.
    """
    stderr = stderr or sys.stderr
    run = batch.run
    outcome = Outcome(input_path, output_path)
    pending: dict[tuple[int, str | None], tuple[dict[str, Any], str]] = {}  # in flight: its line's head, fp
    refused: list[tuple[BatchResult, dict[str, Any], str]] = []  # held back while every answer refuses
    size = input_size(input_path)  # lines appended from now on are the next run's
    defaults = run.params
    results: ResultFile | StandardOutput
    results = (
        StandardOutput()
        if output_path == STDIO
        else ResultFile(output_path, run, allow_changes=allow_changes)
    )
    with results:
        if retry_failed:
            dropped = results.drop_failures()
            print(f"{output_path}: {dropped} failed results removed, to be sent again", file=stderr)
        budget = _budget(batch, results)

        def fingerprint(line: Line, target: str | None) -> str:
            return (
                refused_fingerprint(line.raw)
                if line.error
                else run.fingerprint(target, line.prompt, line.params)
            )

        def lines(claim: Callable[[Id], bool], on_blank: Callable[[int], None] = lambda index: None) -> Any:
            return read_lines(
                input_path, size, claim=claim, defaults=defaults, check=check, on_blank=on_blank
            )

        def count() -> tuple[int | None, int]:
            """The results to have and those done, for the bar (a pipe is read once: not known ahead)."""
            if size is None:
                return None, 0
            total = done = 0
            claimed: set[Id] = set()

            def claim(line_id: Id) -> bool:
                first = line_id not in claimed
                claimed.add(line_id)
                return first

            for line in lines(claim):  # the ids claimed as the run will claim them
                for target in run.names:
                    total += 1
                    done += results.done(target, line.index, line.id, fingerprint(line, target))
            return total, done

        bar = progress(stderr, show_progress, count)

        def finish(head: dict[str, Any], fields: dict[str, Any], fp: str) -> None:
            results.write({**head, **fields, "fingerprint": fp})
            outcome.finished(fields["error"])
            bar.advance(outcome.failed)

        def jobs() -> Generator[TargetJob, None, None]:
            for line in lines(results.claim, outcome.blanks.append):
                if outcome.stopped:
                    return
                if line.error is not None:
                    outcome.refused_line(line.index)
                noted = False
                for target in run.names:
                    fp = fingerprint(line, target)
                    if results.done(target, line.index, line.id, fp):
                        outcome.skip(results.failed(target, line.index, line.id), line.error is not None)
                        continue
                    head = {
                        "index": line.index,
                        **line.given,
                        **({} if target is None else {"target": target}),
                    }
                    if line.error is not None:
                        if not noted:  # once a line, and not again once its results are in the output
                            bar.note(f"{named(input_path)}:{line.index + 1}: {line.error}")
                            noted = True
                        finish(head, error_fields(line.error), fp)
                        continue
                    pending[(line.index, target)] = head, fp
                    yield line.index, target or "", line.prompt, line.params

        started = batch.start(jobs(), budget)
        answered = False  # whether any answer so far was not a refusal
        try:
            async for result in started:
                head, fp = pending.pop((result.index, result.target))
                if result.error is not None and _refusal(result) and (outcome.stopped or not answered):
                    refused.append((result, head, fp))
                    if not answered and len(refused) == REFUSALS_TO_STOP:
                        outcome.stop("refused")
                    continue
                answered = True
                if outcome.stopped is None:  # not a wrong credential or model after all
                    for held, held_head, held_fp in refused:
                        finish(held_head, held.fields(), held_fp)
                    refused.clear()
                finish(head, result.fields(), fp)
        except asyncio.CancelledError:  # Ctrl-C: what was written stays, and the run resumes from it
            outcome.stop("interrupted")
        finally:
            await started.aclose()
            bar.close()
        if refused and outcome.stopped is None:
            outcome.stop("refused")  # every answer was a refusal
        if budget is not None and budget.reached and outcome.stopped is None:
            outcome.stop("budget")
    outcome.stats = started.stats
    outcome.totals = results.totals
    outcome.budget = budget
    if refused:
        first = refused[0][0].error
        assert first is not None
        which = (
            f"the first {REFUSALS_TO_STOP} requests were"
            if len(refused) >= REFUSALS_TO_STOP
            else "every request was"
        )
        print(f"stopped: {which} refused, the first with {describe(first)}", file=stderr)
        print("nothing was written for them: fix the credential or the model, then run it again", file=stderr)
    print_summary(outcome, stderr, command=command, retry_failed=retry_failed)
    if summary_path is not None:
        write_summary(outcome, summary_path)
    if outcome.stopped == "interrupted":
        return INTERRUPTED
    if outcome.stopped == "budget":
        return BUDGET_REACHED
    return 1 if outcome.stopped == "refused" or outcome.failed or outcome.failed_before else 0


def _refusal(result: BatchResult) -> bool:
    return getattr(result.error, "status_code", None) in _REFUSED


def _budget(batch: Batch, results: ResultFile | StandardOutput) -> Budget | None:
    """The run's budget, less what the results already in the output spent."""
    if batch.budget_requests is None and batch.budget_tokens is None:
        return None
    totals = results.totals
    return Budget(
        requests=batch.budget_requests,
        tokens=batch.budget_tokens,
        spent_requests=totals.results - totals.failures.get("InputLineError", 0),
        spent_tokens=totals.prompt_tokens + totals.response_tokens,
    )
