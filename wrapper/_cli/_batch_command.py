"""``python -m wrapper batch``: prompts from a JSONL file through ``complete_many`` into a resumable one."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from wrapper._batch import acomplete_jobs
from wrapper._cli._inputs import InputLineError, count_inputs, read_jobs
from wrapper._cli._progress import progress
from wrapper._cli._results import ResultFile

if TYPE_CHECKING:
    from wrapper._batch import Completer
    from wrapper._results import Completion

__all__ = ["describe", "error_line", "result_line", "run_batch"]


def result_line(index: int, completion: Completion) -> dict[str, Any]:
    return {
        "index": index,
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "response_tokens": completion.response_tokens,
    }


def error_line(index: int, exc: BaseException) -> dict[str, Any]:
    status = getattr(exc, "status_code", None)
    return {"index": index, "error": {"type": type(exc).__name__, "status": status, "message": str(exc)}}


def describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"{type(exc).__name__}{f' ({status})' if status else ''}: {exc}"


async def run_batch(
    client: Completer,
    model: str,
    input_path: str,
    output_path: str,
    *,
    concurrency: int,
    defaults: Mapping[str, Any],
    check: Callable[[dict[str, Any]], None],
    show_progress: bool | None,
    stderr: TextIO | None = None,
) -> int:
    """Complete every input not yet in the output, appending a result line each; 1 if any failed, else 0."""
    stderr = stderr or sys.stderr
    counts = {"done": 0, "failed": 0, "skipped": 0, "failed before": 0}
    with ResultFile(output_path) as results:
        bar = progress(stderr, show_progress, lambda: count_inputs(input_path, results.done))

        def skip(index: int) -> bool:
            if not results.done(index):
                return False
            counts["skipped"] += 1
            counts["failed before"] += results.failed(index)
            return True

        def finish(line: dict[str, Any]) -> None:
            results.write(line)
            counts["failed" if "error" in line else "done"] += 1
            bar.advance(counts["failed"])

        def bad(index: int, exc: InputLineError) -> None:
            bar.note(f"{input_path}:{index + 1}: {exc}")
            finish(error_line(index, exc))

        jobs = read_jobs(input_path, skip=skip, defaults=defaults, check=check, on_bad=bad)
        batch = acomplete_jobs(
            client, model, jobs, concurrency=concurrency, ordered=False, return_exceptions=True
        )
        try:
            async for result in batch:
                if result.error is not None:
                    finish(error_line(result.index, result.error))
                elif result.completion is not None:
                    finish(result_line(result.index, result.completion))
        finally:
            await batch.aclose()
            jobs.close()
            bar.close()
    skipped = f"{counts['skipped']} skipped (already in {output_path}"
    skipped += f", {counts['failed before']} of them failed)" if counts["failed before"] else ")"
    print(f"{counts['done']} done, {counts['failed']} failed, {skipped}", file=stderr)
    return 1 if counts["failed"] or counts["failed before"] else 0
