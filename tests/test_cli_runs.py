"""An evaluation run on the command line: a fan-out to two models that survives SIGKILL, a budget that
stops a run and lets a higher one finish it, and a summary whose totals are the sums of the lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wrapper._cli import main
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox

MODELS = ("llama-3-8b-instruct", "mistral-7b-instruct")
BUDGET_REACHED = 3


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """A sandbox that keeps no exchange: thousands of requests go through it."""
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture
def served(sandbox: Sandbox) -> Sandbox:
    sandbox.clear_faults()
    sandbox.reset_stats()
    return sandbox


def _flags(sb: Sandbox) -> list[str]:
    return ["--base-url", sb.scale_base_url, "--api-key", "k", "--account-id", "a", "--no-progress"]


def _inputs(path: Path, n: int) -> Path:
    path.write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": f"Alice number {i}"}) + "\n" for i in range(n))
    )
    return path


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SGP_", "GRADIENT_"))}


def _sums(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each target's results, failures by type and token sums, counted from the lines themselves."""
    sums: dict[str, dict[str, Any]] = {}
    for line in lines:
        target = sums.setdefault(
            line["target"], {"results": 0, "failures": Counter(), "prompt": 0, "response": 0}
        )
        target["results"] += 1
        if line["error"] is not None:
            target["failures"][line["error"]["type"]] += 1
        target["prompt"] += line["prompt_tokens"] or 0
        target["response"] += line["response_tokens"] or 0
    return sums


def _totals_of(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "results": totals["results"],
            "failures": Counter(totals["failures"]),
            "prompt": totals["prompt_tokens"],
            "response": totals["response_tokens"],
        }
        for name, totals in summary["results"]["targets"].items()
    }


def test_a_3000_prompt_fan_out_to_two_models_survives_sigkill_and_totals_its_lines(
    served: Sandbox, tmp_path: Path
) -> None:
    inputs, output, summary = (
        _inputs(tmp_path / "in.jsonl", 3000),
        tmp_path / "out.jsonl",
        tmp_path / "sum.json",
    )
    command = ["batch", "scale", ",".join(MODELS), str(inputs), "-o", str(output), "--max-tokens", "1"]
    command += ["--concurrency", "64", "--summary", str(summary), *_flags(served)]
    served.inject(delay=0.05, rate=1.0)  # 6,000 answers take 5 s at 64 in flight: it is killed part-way
    with subprocess.Popen(
        [sys.executable, "-m", "wrapper", *command], env=_env(), stderr=subprocess.PIPE
    ) as first:
        deadline = time.monotonic() + 60
        while (
            not output.exists() or output.read_bytes().count(b"\n") < 1 + 1000  # the record, 1,000 results
        ) and time.monotonic() < deadline:
            time.sleep(0.01)
        served.clear_faults()
        served.inject(delay=60, rate=1.0)  # and from now on held: however late the kill, it is mid-run
        first.send_signal(signal.SIGKILL)
        first.communicate()
    assert first.returncode == -signal.SIGKILL
    before = output.read_bytes()
    kept = before[: before.rfind(b"\n") + 1]
    written = kept.count(b"\n") - 1  # after the run's record
    assert 1000 <= written < 6000
    with output.open("ab") as f:
        f.write(b'{"index": 2999, "target": "llama-3-8b-instruct", "te')  # a write cut short by the kill

    served.clear_faults()
    resumed = subprocess.run(
        [sys.executable, "-m", "wrapper", *command], env=_env(), capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    after = output.read_bytes()
    assert after.startswith(kept)  # what the killed run wrote is all still there
    lines = [json.loads(line) for line in after.splitlines()[1:]]
    assert len(lines) == 6000
    assert Counter((line["id"], line["target"]) for line in lines) == {
        (f"p{i}", model): 1 for i in range(3000) for model in MODELS
    }  # none lost, none repeated
    assert all(line["error"] is None for line in lines)
    assert served.stats().requests - 6000 <= 64  # resent: at most what was in flight at the kill
    totals = json.loads(summary.read_text())
    assert _totals_of(totals) == _sums(lines)
    assert totals["run"]["done"] == 6000 - written
    assert totals["run"]["skipped"] == written


def test_a_fan_outs_summary_counts_failures_by_type_and_tokens_per_target(
    served: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output, summary = (
        _inputs(tmp_path / "in.jsonl", 40),
        tmp_path / "out.jsonl",
        tmp_path / "sum.json",
    )
    with inputs.open("a") as f:
        f.write('{"id": "bad", "prompt": ""}\n')
    served.inject(status=503, count=2, api="scale", model=MODELS[1])  # too few to cool the model down
    command = ["batch", "scale", ",".join(MODELS), str(inputs), "-o", str(output), "--max-tokens", "2"]
    assert main([*command, "--max-retries", "0", "--summary", str(summary), *_flags(served)]) == 1
    err = capsys.readouterr().err
    lines = list(read_results(str(output)))
    sums = _sums(lines)
    assert sums[MODELS[0]]["failures"] == {"InputLineError": 1}
    assert sums[MODELS[1]]["failures"] == {"InputLineError": 1, "InternalServerError": 2}
    assert _totals_of(json.loads(summary.read_text())) == sums
    for model in MODELS:
        target = sums[model]
        failed = sum(target["failures"].values())
        kinds = ", ".join(
            f"{n} {kind}" for kind, n in sorted(target["failures"].items(), key=lambda i: (-i[1], i[0]))
        )
        assert (
            f"  {model}: 41 results: {41 - failed} succeeded, {failed} failed ({kinds}); "
            f"{target['prompt']} prompt tokens, {target['response']} response tokens"
        ) in err
    assert "to send the 2 failed again: " in err  # the refused line is not one: it fails as it is
    assert "1 input line was refused (the first: " in err


def test_retry_failed_in_a_fan_out_sends_again_the_failed_pairs_alone(
    served: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl", 30), tmp_path / "out.jsonl"
    served.inject(status=400, count=2, api="scale", model=MODELS[0])
    served.inject(status=400, count=1, api="scale", model=MODELS[1])
    command = ["batch", "scale", ",".join(MODELS), str(inputs), "-o", str(output), "--max-tokens", "1"]
    assert main([*command, *_flags(served)]) == 1
    failed = {(line["id"], line["target"]) for line in read_results(str(output)) if line["error"] is not None}
    assert len(failed) == 3
    served.reset_stats()
    capsys.readouterr()
    assert main([*command, "--retry-failed", *_flags(served)]) == 0
    assert "3 done, 0 failed, 57 skipped" in capsys.readouterr().err
    assert served.stats().requests == 3  # each failed (id, model) once, and nothing else
    lines = list(read_results(str(output)))
    assert Counter((line["id"], line["target"]) for line in lines) == {
        (f"p{i}", model): 1 for i in range(30) for model in MODELS
    }
    assert all(line["error"] is None for line in lines)


def test_a_token_budget_stops_the_run_with_its_own_exit_code_and_a_higher_one_finishes_it(
    served: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output, summary = (
        _inputs(tmp_path / "in.jsonl", 200),
        tmp_path / "out.jsonl",
        tmp_path / "sum.json",
    )
    command = ["batch", "scale", MODELS[0], str(inputs), "-o", str(output), "--max-tokens", "4"]
    command += ["--concurrency", "8", "--summary", str(summary), *_flags(served)]
    assert main([*command, "--budget-tokens", "600"]) == BUDGET_REACHED
    err = capsys.readouterr().err
    lines = list(read_results(str(output)))
    spent = sum(line["prompt_tokens"] + line["response_tokens"] for line in lines)
    assert 0 < len(lines) < 200
    assert served.stats().requests == len(lines)  # nothing held back was sent
    assert spent <= 600  # each estimate (length / 4 + max tokens) covered its answer: nothing past it
    assert f"stopped at its budget: {len(lines)} requests, {spent} tokens of 600; to go on, " in err
    assert json.loads(summary.read_text())["stopped"] == "budget"

    # The same cap again: what the output spent counts, so it stops at once (or after a prompt or two
    # that the bookings of the requests in flight kept out before, and that fit now).
    assert main([*command, "--budget-tokens", "600"]) == BUDGET_REACHED
    lines = list(read_results(str(output)))
    assert sum(line["prompt_tokens"] + line["response_tokens"] for line in lines) <= 600
    assert served.stats().requests == len(lines) < 200
    capsys.readouterr()

    assert main([*command, "--budget-tokens", "100000"]) == 0
    assert f"{200 - len(lines)} done, 0 failed, {len(lines)} skipped" in capsys.readouterr().err
    assert sorted(line["id"] for line in read_results(str(output))) == sorted(f"p{i}" for i in range(200))
    assert served.stats().requests == 200  # none sent twice


def test_a_request_budget_counts_each_target_of_a_fan_out(
    served: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = _inputs(tmp_path / "in.jsonl", 100), tmp_path / "out.jsonl"
    command = ["batch", "scale", ",".join(MODELS), str(inputs), "-o", str(output), "--max-tokens", "1"]
    assert main([*command, "--budget-requests", "51", *_flags(served)]) == BUDGET_REACHED
    assert len(list(read_results(str(output)))) == served.stats().requests == 51
    assert main([*command, "--budget-requests", "200", *_flags(served)]) == 0
    assert len(list(read_results(str(output)))) == served.stats().requests == 200
