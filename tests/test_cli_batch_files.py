"""``python -m wrapper batch``'s files: an output that is the input is refused, the input is read up to
its size at start, blank lines are reported, and fixing a line never leaves it two results."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper._cli import _batch_command, main
from wrapper._cli._results import ResultFile
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox

MODEL = "llama-3-8b-instruct"


def _flags(sandbox: Sandbox) -> list[str]:
    return ["--base-url", sandbox.scale_base_url, "--api-key", "k", "--account-id", "a"]


def _results(path: Path) -> list[dict[str, Any]]:
    return list(read_results(str(path)))


def _prompts(n: int) -> str:
    return "".join(json.dumps({"prompt": f"Alice number {i}", "max_tokens": 1}) + "\n" for i in range(n))


@pytest.mark.parametrize("spelling", ["same", "dot-slash", "hard link", "symlink"])
def test_an_output_that_is_the_input_is_a_usage_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    inputs = Path("two.jsonl")
    inputs.write_text(_prompts(2))
    output = {
        "same": "two.jsonl",
        "dot-slash": "./two.jsonl",
        "hard link": "link.jsonl",
        "symlink": "sym.jsonl",
    }
    if spelling == "hard link":
        os.link(inputs, "link.jsonl")
    elif spelling == "symlink":
        os.symlink(inputs, "sym.jsonl")
    before = inputs.read_bytes()
    with pytest.raises(SystemExit) as exited:
        main(["batch", "scale", MODEL, "two.jsonl", "-o", output[spelling], "--api-key", "k"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m wrapper batch scale ")  # the subcommand's usage
    assert f"-o/--output {output[spelling]} is the input file two.jsonl (the same file)" in err
    assert inputs.read_bytes() == before  # never opened for writing


@pytest.mark.timeout(60)
def test_lines_appended_to_the_input_during_a_run_are_not_read(
    counted_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text(_prompts(300))  # more than a read buffer: the reader is still reading when results come
    appended = 0

    class Feeding(ResultFile):
        """Each result also appended to the input, as a run writing into its own input did: endless."""

        def write(self, result: dict[str, Any]) -> None:
            nonlocal appended
            super().write(result)
            if appended < 1000:  # bounded, so that the run ends even if it reads them
                appended += 1
                with inputs.open("a") as f:
                    f.write(json.dumps({"prompt": f"appended {appended}", "max_tokens": 1}) + "\n")

    monkeypatch.setattr(_batch_command, "ResultFile", Feeding)
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), "--concurrency", "2"]
    assert main([*command, *_flags(counted_sandbox)]) == 0
    assert appended == 300  # one per result: the run met the appended lines while reading
    assert sorted(r["index"] for r in _results(output)) == list(range(300))  # one record per line it had
    assert counted_sandbox.stats().requests == 300


def test_after_a_resume_the_progress_bar_ends_at_its_total_whatever_ids_are_repeated(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    first = [{"id": "a", "prompt": "Alice"}, {"id": "b", "prompt": "Bill"}]
    inputs.write_text("".join(json.dumps(line) + "\n" for line in first))
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), "--progress"]
    command += _flags(counted_sandbox)
    assert main(command) == 0
    more = [{"id": "a", "prompt": "Alice again"}, {"id": "c", "prompt": "Cat"}, {"id": "a", "prompt": "Dodo"}]
    inputs.write_text("".join(json.dumps(line) + "\n" for line in first + more))  # an id used twice more
    capsys.readouterr()
    assert main(command) == 1
    bar = re.findall(r"(\d+)/(\d+) \[", capsys.readouterr().err)
    assert bar[0] == ("2", "5")  # a line repeating a done line's id is not done: it is refused once read
    assert bar[-1] == ("5", "5")


def test_blank_lines_are_counted_in_the_summary(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = _prompts(3).splitlines()
    inputs.write_text(f"{lines[0]}\n\n{lines[1]}\n   \n\n{lines[2]}\n")
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_flags(counted_sandbox)]
    assert main(command) == 0  # a blank line is no failure
    summary = capsys.readouterr().err.splitlines()[0]
    blanks = f"3 blank lines not sent (the first: {inputs}:2)"
    assert summary == f"3 done, 0 failed, 0 skipped (already in {output}), {blanks}"
    assert sorted(r["index"] for r in _results(output)) == [0, 2, 5]
    inputs.write_text(f"{lines[0]}\n\n{lines[1]}\n")
    assert main(command) == 0
    assert capsys.readouterr().err.splitlines()[0].endswith(f", 1 blank line not sent ({inputs}:2)")


def test_a_json_error_names_the_column_next_to_the_files_line(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_bytes(
        b'{"prompt": "Alice"}\n{"prompt": "a" "b"}\n{"prompt": "caf\xe9"}\n'
        b'{"prompt": "missing brace"\n{"prompt": "missing brace"\r\n{"prompt": "missing brace"\n'
        b'{"prompt": "no closing quote}'
    )
    assert main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *_flags(counted_sandbox)]) == 1
    err = capsys.readouterr().err
    assert f"{inputs}:2: not JSON (Expecting ',' delimiter at column 16)\n" in err
    assert f"{inputs}:7: not JSON (Unterminated string starting at column 12)\n" in err  # "at" once
    assert f"{inputs}:3: not UTF-8 text (byte 16 is not UTF-8)\n" in err
    for line in (4, 5, 6):  # the end of the line, whatever ends it, and not the line break's column
        assert f"{inputs}:{line}: not JSON (Expecting ',' delimiter at column 27)\n" in err
    assert "line 1" not in err
    results = {r["index"]: r for r in _results(output)}
    assert results[1]["error"]["message"] == "not JSON (Expecting ',' delimiter at column 16)"
    assert results[3]["error"]["message"] == "not JSON (Expecting ',' delimiter at column 27)"


_FIXES = {  # a bad line, the id its result keeps, and the same line fixed by giving it an id
    "not JSON": ('{"prompt": "Alice Alice" oops}', None, {"id": "fixed", "prompt": "Alice Alice"}),
    "no prompt": ('{"text": "Alice Alice"}', None, {"id": "fixed", "prompt": "Alice Alice"}),
    "a bad id": ('{"id": 1.5, "prompt": "Alice Alice"}', 1.5, {"id": 15, "prompt": "Alice Alice"}),
    "a duplicate id": (
        '{"id": "first", "prompt": "Alice Alice"}',
        "first",
        {"id": "second", "prompt": "Alice Alice"},
    ),
}


@pytest.mark.parametrize("bad", list(_FIXES))
@pytest.mark.parametrize("retry_failed", [False, True], ids=["plain resume", "--retry-failed"])
def test_a_bad_line_fixed_is_sent_again_and_never_has_two_results(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, retry_failed: bool
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    first = json.dumps({"id": "first", "prompt": "Alice", "max_tokens": 1})
    last = json.dumps({"prompt": "The Rabbit", "max_tokens": 1})
    broken, kept_id, fixed = _FIXES[bad]
    inputs.write_text(f"{first}\n{broken}\n{last}\n")
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_flags(counted_sandbox)]
    assert main(command) == 1
    [refused] = [r for r in _results(output) if r["index"] == 1]
    assert refused["error"]["type"] == "InputLineError"
    assert refused.get("id") == kept_id  # the id as the line has it, even one it cannot be known by

    inputs.write_text(f"{first}\n{json.dumps({**fixed, 'max_tokens': 1})}\n{last}\n")
    counted_sandbox.reset_stats()
    capsys.readouterr()
    # either way, the fixed line is another request: it is sent, and its result replaces the error
    assert main([*command, "--retry-failed"] if retry_failed else command) == 0
    err = capsys.readouterr().err
    results = _results(output)
    assert sorted(r["index"] for r in results) == [0, 1, 2]  # one result per input line
    assert len(Path(output).read_text().splitlines()) == 4  # and the file holds nothing else but its record
    [line] = [r for r in results if r["index"] == 1]
    assert (line.get("id"), line["prompt_tokens"], line["error"]) == (fixed["id"], 2, None)
    assert counted_sandbox.stats().requests == 1
    assert "1 done, 0 failed, 2 skipped" in err
    assert main(command) == 0  # and it stays done


def test_giving_ids_to_lines_already_done_by_position_sends_nothing_again(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    prompts = [json.loads(line) for line in _prompts(4).splitlines()]
    inputs.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_flags(counted_sandbox)]
    assert main(command) == 0
    inputs.write_text("".join(json.dumps({"id": f"q{i}", **p}) + "\n" for i, p in enumerate(prompts)))
    counted_sandbox.reset_stats()
    capsys.readouterr()
    assert main(command) == 0
    assert "0 done, 0 failed, 4 skipped" in capsys.readouterr().err
    assert counted_sandbox.stats().requests == 0
    assert sorted(r["index"] for r in _results(output)) == [0, 1, 2, 3]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("progress", ["--progress", "--no-progress"])  # the bar must not read it first
def test_a_pipe_as_input_is_read_to_its_end(counted_sandbox: Sandbox, tmp_path: Path, progress: str) -> None:
    fifo, output = tmp_path / "prompts.fifo", tmp_path / "out.jsonl"
    os.mkfifo(fifo)  # no size to stop at: a pipe is read until its writer closes it
    writer = threading.Thread(target=fifo.write_text, args=(_prompts(5),))
    writer.start()
    command = ["batch", "scale", MODEL, str(fifo), "-o", str(output), progress, *_flags(counted_sandbox)]
    try:
        assert main(command) == 0
    finally:
        if writer.is_alive():  # the run never opened the pipe: let the writer's open return
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join()
    assert sorted(r["index"] for r in _results(output)) == list(range(5))


def _batch(*args: str, stdin: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m wrapper batch ARGS`` in a process of its own in ``cwd``, its standard input a string or
    a file."""
    command = [sys.executable, "-m", "wrapper", "batch", *args]
    if isinstance(stdin, Path):
        with stdin.open() as file:
            return subprocess.run(command, stdin=file, capture_output=True, text=True, timeout=60, cwd=cwd)
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize("progress", ["--progress", "--no-progress"])
def test_dash_as_the_input_is_standard_input_and_resumes_by_position(
    counted_sandbox: Sandbox, tmp_path: Path, progress: str
) -> None:
    output = tmp_path / "out.jsonl"
    command = ["scale", MODEL, "-", "-o", str(output), progress, *_flags(counted_sandbox)]
    first = _batch(*command, stdin=_prompts(3), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert sorted(r["index"] for r in _results(output)) == [0, 1, 2]
    assert "3 done, 0 failed, 0 skipped" in first.stderr
    assert counted_sandbox.stats().requests == 3
    again = _batch(
        *command, stdin=_prompts(5), cwd=tmp_path
    )  # the same lines and two more: only those are sent
    assert again.returncode == 0, again.stderr
    assert "2 done, 0 failed, 3 skipped" in again.stderr
    assert sorted(r["index"] for r in _results(output)) == [0, 1, 2, 3, 4]
    assert counted_sandbox.stats().requests == 5


def test_dash_as_the_output_writes_the_results_to_standard_output(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(_prompts(3) + '{"prompt": ""}\n')
    run = _batch("scale", MODEL, str(inputs), "-o", "-", *_flags(counted_sandbox), stdin="", cwd=tmp_path)
    assert run.returncode == 1  # the empty prompt
    results = [json.loads(line) for line in run.stdout.splitlines()]  # results only: the rest is on stderr
    assert sorted(r["index"] for r in results) == [0, 1, 2, 3]
    assert [r["index"] for r in results if r["error"] is not None] == [3]
    assert "3 done, 1 failed, 0 skipped" in run.stderr
    assert "--retry-failed" not in run.stderr  # standard output keeps nothing to retry from
    assert not (tmp_path / "-").exists()
    # nothing to resume from: a second run sends everything again
    again = _batch("scale", MODEL, "-", "-o", "-", *_flags(counted_sandbox), stdin=inputs, cwd=tmp_path)
    assert again.stdout.count("\n") == 4
    assert counted_sandbox.stats().requests == 6


def test_retry_failed_with_standard_output_is_a_usage_error(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    flags = ["--retry-failed", *_flags(counted_sandbox)]
    run = _batch("scale", MODEL, "-", "-o", "-", *flags, stdin=_prompts(1), cwd=tmp_path)
    assert run.returncode == 2
    why = "--retry-failed needs an output file to rewrite: -o - (standard output) keeps no results"
    assert run.stderr == f"error: {why}\n"
    assert counted_sandbox.stats().requests == 0
    assert list(tmp_path.iterdir()) == []


def test_standard_input_that_is_the_output_file_is_refused(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(_prompts(2))
    before = inputs.read_bytes()
    run = _batch("scale", MODEL, "-", "-o", str(inputs), *_flags(counted_sandbox), stdin=inputs, cwd=tmp_path)
    assert run.returncode == 2
    assert f"-o/--output {inputs} is the input file - (standard input) (the same file)" in run.stderr
    assert inputs.read_bytes() == before


def test_a_reader_that_stops_reading_the_results_stops_the_run_quietly(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    """``-o - | head -1``: the rest of the batch is not sent, and nothing is said of a broken pipe."""
    inputs = tmp_path / "in.jsonl"
    inputs.write_text(_prompts(500))
    command = [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, str(inputs), "-o", "-"]
    with subprocess.Popen(
        [*command, "--concurrency", "1", *_flags(counted_sandbox)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    ) as run:
        assert run.stdout is not None
        assert run.stderr is not None
        first = json.loads(run.stdout.readline())
        run.stdout.close()  # as head does once it has its line
        err = run.stderr.read().decode()
        assert run.wait(timeout=30) == 1
    assert first["index"] == 0
    assert err == ""
    assert counted_sandbox.stats().requests < 500
