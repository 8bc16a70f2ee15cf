"""``python -m wrapper batch``: prompts from a JSONL file through ``complete_many`` into a resumable one."""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from wrapper._cli._inputs import (
    STDIO,
    Id,
    Input,
    InputLineError,
    count_inputs,
    input_size,
    named,
    read_inputs,
)
from wrapper._cli._progress import progress
from wrapper._cli._results import ResultFile, StandardOutput
from wrapper.batch import Job, acomplete_jobs

if TYPE_CHECKING:
    from wrapper import AsyncClient, AsyncRouter, BatchStats, Completion

    Completer = AsyncClient | AsyncRouter

__all__ = ["REFUSALS_TO_STOP", "describe", "error_fields", "result_fields", "run_batch"]

REFUSALS_TO_STOP = 5
"""A batch whose first this many answers (or all of them, if fewer) are 401, 403 or 404 stops: a wrong
credential or model would refuse every prompt. It sends no more prompts (those in flight are answered)
and writes none of those refusals, so the same command, once the cause is fixed, sends them again."""
_REFUSED = (401, 403, 404)


def result_fields(completion: Completion) -> dict[str, Any]:
    """A completion as the fields of an output line (``cached``: whether a response cache gave it;
    ``route``: the route that served it, in a batch over routes)."""
    return {
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "response_tokens": completion.response_tokens,
        "request_id": _request_id(completion),
        "cached": completion.cached,
        **({} if completion.route is None else {"route": completion.route}),
    }


def error_fields(exc: BaseException) -> dict[str, Any]:
    """An error as the fields of an output line."""
    status = getattr(exc, "status_code", None)
    error = {"type": type(exc).__name__, "status": status, "message": str(exc)}
    return {"error": error, "request_id": _request_id(exc)}


def _request_id(answered: object) -> str | None:
    """The server's ``x-request-id`` for a completion or an API error; None for a line never sent."""
    request_id: str | None = getattr(answered, "request_id", None)
    return request_id


def _throughput(stats: BatchStats) -> str:
    """The summary's second line: requests, 429s, retries, achieved rates and latency."""
    return (
        f"{stats.requests} requests ({stats.rate_limited} got 429, {stats.retries} retries): "
        f"{stats.requests_per_minute:.1f} requests/min, {stats.tokens_per_minute:.0f} tokens/min, "
        f"latency p50 {_seconds(stats.latency_p50)}, p95 {_seconds(stats.latency_p95)}"
    )


def _seconds(latency: float | None) -> str:
    return "-" if latency is None else f"{latency:.3f}s"


def describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' ({status})' if status else ''}: {exc}"


async def run_batch(
    client: Completer,
    model: str | None,
    input_path: str,
    output_path: str,
    *,
    concurrency: int,
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any], str], None],
    show_progress: bool | None,
    retry_failed: bool = False,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    stderr: TextIO | None = None,
    command: str | None = None,
) -> int:
    """Complete every input not yet in the output, appending a result line each; 1 if any failed, else 0.

    ``client`` is a client called with ``model``, or with ``model`` None an async router.

    ``-`` is standard input as ``input_path``, standard output as ``output_path`` (which then keeps
    nothing to resume from). ``retry_failed`` first removes the output's error results, so that their
    inputs are sent again. The per-minute limits pace the batch (``complete_many``'s); None is no limit.
    ``command`` (the command line of this run, secrets masked) is what the summary suggests re-running
    with ``--retry-failed`` when some input failed.
    """
    stderr = stderr or sys.stderr
    counts = {"done": 0, "failed": 0, "skipped": 0, "failed before": 0}
    ids: dict[int, Id] = {}  # index -> id of the inputs in flight that have one
    blanks: list[int] = []  # the indices of the blank lines
    refused: list[tuple[int, Id | None, BaseException]] = []  # held back while every answer is a refusal
    size = input_size(input_path)  # lines appended from now on are the next run's
    with StandardOutput() if output_path == STDIO else ResultFile(output_path) as results:
        if retry_failed:
            dropped = results.drop_failures()
            print(f"{output_path}: {dropped} failed results removed, to be sent again", file=stderr)

        def count() -> tuple[int | None, int]:
            """The inputs and those done, for the bar; a pipe is read once, so its count is not known."""
            return (None, 0) if size is None else count_inputs(input_path, size, results.done)

        bar = progress(stderr, show_progress, count)

        def skip(index: int, line_id: Id | None) -> bool:
            if not results.done(index, line_id):
                return False
            counts["skipped"] += 1
            counts["failed before"] += results.failed(index, line_id)
            return True

        def finish(index: int, line_id: Id | None, fields: dict[str, Any]) -> None:
            results.write({"index": index, **({} if line_id is None else {"id": line_id}), **fields})
            counts["failed" if "error" in fields else "done"] += 1
            bar.advance(counts["failed"])

        def bad(index: int, line_id: Id | None, exc: InputLineError) -> None:
            bar.note(f"{named(input_path)}:{index + 1}: {exc}")
            finish(index, line_id, error_fields(exc))

        inputs = read_inputs(
            input_path,
            size,
            skip=skip,
            claim=results.claim,
            defaults=defaults,
            check=check,
            on_bad=bad,
            on_blank=blanks.append,
        )
        stopping = False  # the first answers all refused: send no more
        batch = acomplete_jobs(
            client,
            model,
            _jobs(inputs, ids, lambda: stopping),
            concurrency=concurrency,
            ordered=False,
            return_exceptions=True,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )
        answered = False  # whether any answer so far was not a refusal
        try:
            async for result in batch:
                line_id = ids.pop(result.index, None)
                error = result.error
                refusal = getattr(error, "status_code", None) in _REFUSED
                if error is not None and refusal and (stopping or not answered):
                    refused.append((result.index, line_id, error))
                    stopping = stopping or (not answered and len(refused) == REFUSALS_TO_STOP)
                    continue
                answered = True
                if not stopping:  # not a wrong credential or model after all
                    for index, held_id, held in refused:
                        finish(index, held_id, error_fields(held))
                    refused.clear()
                if error is not None:
                    finish(result.index, line_id, error_fields(error))
                elif result.completion is not None:
                    finish(result.index, line_id, result_fields(result.completion))
        finally:
            await batch.aclose()
            inputs.close()
            bar.close()
    if refused:
        which = f"the first {REFUSALS_TO_STOP} requests were" if stopping else "every request was"
        print(f"stopped: {which} refused, the first with {describe(refused[0][2])}", file=stderr)
        print("nothing was written for them: fix the credential or the model, then run it again", file=stderr)
    print(_summary(counts, output_path, named(input_path), blanks), file=stderr)
    if batch.stats.requests:
        print(_throughput(batch.stats), file=stderr)
    failed = counts["failed"] + counts["failed before"]
    if failed and not refused and output_path != STDIO:  # standard output: nothing to retry from
        again = f"{command} --retry-failed" if command and not retry_failed else command
        print(
            f"to send the {failed} failed again: {again or 'the same command with --retry-failed'}",
            file=stderr,
        )
    return 1 if failed or refused else 0


def _summary(counts: dict[str, int], output_path: str, input_name: str, blanks: list[int]) -> str:
    """``N done, M failed, K skipped (already in OUTPUT[, F of them failed])[, B blank lines not sent]``."""
    before = f", {counts['failed before']} of them failed" if counts["failed before"] else ""
    summary = f"{counts['done']} done, {counts['failed']} failed, {counts['skipped']} skipped"
    if output_path != STDIO:  # standard output holds nothing from before
        summary += f" (already in {output_path}{before})"
    if len(blanks) == 1:
        summary += f", 1 blank line not sent ({input_name}:{blanks[0] + 1})"
    elif blanks:
        summary += f", {len(blanks)} blank lines not sent (the first: {input_name}:{blanks[0] + 1})"
    return summary


def _jobs(
    inputs: Generator[Input, None, None], ids: dict[int, Id], stopping: Callable[[], bool]
) -> Generator[Job, None, None]:
    """The inputs as the batch's jobs until ``stopping()``, noting in ``ids`` the id of each one sent
    that has one."""
    while not stopping() and (next_input := next(inputs, None)) is not None:
        index, line_id, prompt, params = next_input
        if line_id is not None:
            ids[index] = line_id
        yield index, prompt, params
