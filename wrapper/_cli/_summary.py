"""The batch command's summary: what this run did, what its output now holds, and what to do next; on
stderr as text, and with ``--summary PATH`` as JSON.

The output's totals are over every result line it holds (a resumed run's earlier ones too): results,
successes, failures by error type, prompt and response tokens, and the same per target (a fan-out) or
per route (a batch over routes). This run's figures are ``wrapper.BatchStats``'.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TextIO

import attrs

from wrapper.batch import BatchStats, Budget, InputLineError, ResultTotals

from ._inputs import STDIO, named

__all__ = ["Outcome", "Stop", "print_summary", "write_summary"]

Stop = Literal["refused", "budget", "interrupted"]


@attrs.define
class Outcome:
    """What a run did: results written (``done``, ``failed``, of them ``refused`` input lines'), results
    already in the output (``skipped``, of them ``failed_before`` and ``refused_before``), the blank
    lines and refused lines of the input, why it stopped early (None: it did not), its stats, the
    output's totals and the budget."""

    input: str
    output: str
    done: int = 0
    failed: int = 0
    refused: int = 0
    skipped: int = 0
    failed_before: int = 0
    refused_before: int = 0
    blanks: list[int] = attrs.field(factory=list)
    refused_lines: int = 0
    first_refused: int | None = None
    stopped: Stop | None = None
    stats: BatchStats = attrs.field(factory=BatchStats)
    totals: ResultTotals = attrs.field(factory=ResultTotals)
    budget: Budget | None = None

    def finished(self, error: dict[str, Any] | None) -> None:
        """One more result written (``error``: its error object, None for a success)."""
        if error is None:
            self.done += 1
            return
        self.failed += 1
        self.refused += error["type"] == InputLineError.__name__

    def skip(self, failed: bool, refused: bool) -> None:
        """One more result already in the output (an error, a refused line's)."""
        self.skipped += 1
        self.failed_before += failed
        self.refused_before += failed and refused

    def refused_line(self, index: int) -> None:
        """One more input line that cannot be sent as it is."""
        self.refused_lines += 1
        self.first_refused = index if self.first_refused is None else self.first_refused

    def stop(self, why: Stop) -> None:
        self.stopped = why


def print_summary(outcome: Outcome, stream: TextIO, *, command: str | None, retry_failed: bool) -> None:
    """The summary lines: counts, the output's totals (per target or route), this run's figures, and
    what to do next. ``command`` is this run's command line (secrets masked), to suggest again."""
    counts = f"{outcome.done} done, {outcome.failed} failed, {outcome.skipped} skipped"
    before = f", {outcome.failed_before} of them failed" if outcome.failed_before else ""
    if outcome.output != STDIO:  # standard output holds nothing from before
        counts += f" (already in {outcome.output}{before})"
    first = f"{named(outcome.input)}:{outcome.blanks[0] + 1}" if outcome.blanks else ""
    if len(outcome.blanks) == 1:
        counts += f", 1 blank line not sent ({first})"
    elif outcome.blanks:
        counts += f", {len(outcome.blanks)} blank lines not sent (the first: {first})"
    lines = [counts]
    where = "written to standard output" if outcome.output == STDIO else outcome.output
    lines.append(f"{where}: {outcome.totals.describe()}")
    for name, totals in {**outcome.totals.targets, **outcome.totals.routes}.items():
        lines.append(f"  {name}: {totals.describe()}")
    stats = outcome.stats
    if stats.requests:
        lines.append(
            f"{stats.requests} requests ({stats.rate_limited} got 429, {stats.retries} retries): "
            f"{stats.requests_per_minute:.1f} requests/min, {stats.tokens_per_minute:.0f} tokens/min, "
            f"latency p50 {_seconds(stats.latency_p50)}, p95 {_seconds(stats.latency_p95)}"
        )
    if stats.cache_hits or stats.cache_misses:
        lines.append(f"cache: {stats.cache_hits} answered from it, {stats.cache_misses} sent")
    budget = outcome.budget
    if outcome.stopped == "budget" and budget is not None:
        lines.append(
            f"stopped at its budget: {_spent(budget.spent_requests, budget.requests, 'requests')}, "
            f"{_spent(budget.spent_tokens, budget.tokens, 'tokens')}; to go on, run it again with a higher "
            + " or ".join(
                flag
                for flag, cap in (("--budget-requests", budget.requests), ("--budget-tokens", budget.tokens))
                if cap is not None
            )
        )
    if outcome.stopped == "interrupted":
        resume = ": run it again to resume" if outcome.output != STDIO else ""
        lines.append(f"interrupted after {outcome.done} done, {outcome.failed} failed{resume}")
    if outcome.first_refused is not None:
        plural = "s were" if outcome.refused_lines > 1 else " was"
        lines.append(
            f"{outcome.refused_lines} input line{plural} refused (the first: {named(outcome.input)}:"
            f"{outcome.first_refused + 1}): fix them, then run the same command again, which sends the lines "
            "that changed"
        )
    failed = outcome.failed + outcome.failed_before - outcome.refused - outcome.refused_before
    if failed and outcome.stopped != "refused" and outcome.output != STDIO:  # stdout: nothing to retry from
        again = f"{command} --retry-failed" if command and not retry_failed else command
        lines.append(f"to send the {failed} failed again: {again or 'the same command with --retry-failed'}")
    print("\n".join(lines), file=stream)


def write_summary(outcome: Outcome, path: str) -> None:
    """The summary as JSON at ``path``: ``input``, ``output``, ``stopped`` (``"refused"``, ``"budget"``,
    ``"interrupted"`` or null), ``run`` (this run's counts and ``wrapper.BatchStats``' figures),
    ``results`` (the output's totals, per target or route) and ``budget``."""
    budget = outcome.budget
    summary = {
        "input": outcome.input,
        "output": outcome.output,
        "stopped": outcome.stopped,
        "run": {
            "done": outcome.done,
            "failed": outcome.failed,
            "refused": outcome.refused,
            "skipped": outcome.skipped,
            "skipped_failed": outcome.failed_before,
            "blank_lines": len(outcome.blanks),
            "stats": outcome.stats.to_dict(),
        },
        "results": outcome.totals.as_dict(),
        "budget": None
        if budget is None
        else {
            "requests": budget.requests,
            "tokens": budget.tokens,
            "spent_requests": budget.spent_requests,
            "spent_tokens": budget.spent_tokens,
        },
    }
    Path(path).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _seconds(latency: float | None) -> str:
    return "-" if latency is None else f"{latency:.3f}s"


def _spent(spent: int, cap: int | None, what: str) -> str:
    return f"{spent} {what}" + ("" if cap is None else f" of {cap}")
