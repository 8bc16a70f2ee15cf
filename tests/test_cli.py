"""``python -m wrapper`` against the sandbox: complete, batch (resume after SIGKILL), exit codes."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import ECHOES, ESCAPED_CREDENTIALS, LocalServer, echo_secret_reply, fragments, request_id_proxy
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper._cli import _batch_command, main
from wrapper.batch import read_results
from wrapper.batch._run import acomplete_jobs
from wrapper.sandbox import Sandbox

MODEL = "llama-3-8b-instruct"


def _scale_flags(counted_sandbox: Sandbox) -> list[str]:
    return ["--base-url", counted_sandbox.scale_base_url, "--api-key", "sekrit-key", "--account-id", "acct"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGP_", "GRADIENT_"))}
    return {**env, **extra}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrapper", *args],
        capture_output=True,
        text=True,
        env=env or _env(),
        timeout=60,
    )


def _write_inputs(path: Path, n: int) -> None:
    path.write_text(
        "".join(json.dumps({"prompt": f"Alice number {i}", "max_tokens": 2}) + "\n" for i in range(n))
    )


def _results(path: Path) -> list[dict[str, object]]:
    return list(read_results(str(path)))


@pytest.mark.serial  # killed while it runs
def test_a_batch_killed_mid_way_resumes_with_nothing_lost_repeated_or_half_written(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 300)
    counted_sandbox.inject(delay=0.02, rate=1.0, api="scale")  # slow enough to kill it part-way
    command = [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, str(inputs), "-o", str(output)]
    with subprocess.Popen(
        [*command, *_scale_flags(counted_sandbox), "--concurrency", "4"], env=_env()
    ) as first:
        deadline = time.monotonic() + 30
        while (not output.exists() or output.read_bytes().count(b"\n") < 41) and time.monotonic() < deadline:
            time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    before = output.read_bytes()
    kept = before[: before.rfind(b"\n") + 1]
    written = kept.count(b"\n") - 1  # the results, after the run's record
    assert 40 <= written < 300
    with output.open("ab") as f:
        f.write(b'{"index": 299, "text": "half a li')  # as if a write had been cut short
    counted_sandbox.clear_faults()

    second = _run("batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox))
    assert second.returncode == 0, second.stderr
    after = output.read_bytes()
    assert after.startswith(kept)  # what the killed run wrote is all still there
    indices = [r["index"] for r in _results(output)]
    assert sorted(indices) == list(range(300))  # one line per input, no duplicate
    assert all(r["error"] is None for r in _results(output))
    assert f"{300 - written} done, 0 failed, {written} skipped" in second.stderr


def test_bad_lines_are_reported_written_and_counted_as_failures(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        '{"prompt": "Alice", "max_tokens": 3}',
        "not json",
        '{"prompt": ""}',
        '{"text": "no prompt"}',
        '{"prompt": "x", "temperature": "hot"}',
        '{"prompt": "x", "bogus": 1}',
        "",
        '["a list"]',
        '{"prompt": "The Rabbit", "max_tokens": 1}',
    ]
    inputs.write_text("\n".join(lines) + "\n")
    code = main(
        [
            "batch",
            "scale",
            MODEL,
            str(inputs),
            "-o",
            str(output),
            "--max-tokens",
            "8",
            *_scale_flags(counted_sandbox),
        ]
    )
    assert code == 1
    results = {r["index"]: r for r in _results(output)}
    assert sorted(results) == [0, 1, 2, 3, 4, 5, 7, 8]  # the blank line is not an input
    assert [results[0]["response_tokens"], results[8]["response_tokens"]] == [3, 1]  # per-line overrides
    for index in (1, 2, 3, 4, 5, 7):
        assert results[index]["error"]["type"] == "InputLineError"  # type: ignore[index]
    err = capsys.readouterr().err
    assert f"{inputs}:2: not JSON" in err
    assert f"{inputs}:6: unexpected keyword argument 'bogus'" in err
    assert "temperature" in results[4]["error"]["message"]  # type: ignore[index]
    assert "2 done, 6 failed, 0 skipped" in err
    assert counted_sandbox.stats().requests == 2

    code = main(
        [
            "batch",
            "scale",
            MODEL,
            str(inputs),
            "-o",
            str(output),
            "--max-tokens",
            "8",
            *_scale_flags(counted_sandbox),
        ]
    )
    assert code == 1  # the output still holds failures
    err = capsys.readouterr().err
    assert "0 done, 0 failed, 8 skipped (already in" in err
    assert f"{inputs}:2: not JSON" not in err  # a bad line is reported once, not again on each resume


def test_api_errors_become_error_lines_and_exit_1(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 5)
    counted_sandbox.inject(status=400, count=1, api="scale")
    assert (
        main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]) == 1
    )
    errors = [r["error"] for r in _results(output) if r["error"] is not None]
    assert errors == [{"type": "BadRequestError", "status": 400, "message": errors[0]["message"]}]  # type: ignore[index]
    assert "4 done, 1 failed" in capsys.readouterr().err


def test_a_clean_batch_exits_0_and_a_rerun_skips_everything(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 20)
    env = _env(
        SGP_CLIENT_BASE_URL=counted_sandbox.scale_base_url, SGP_API_KEY="sekrit-key", SGP_ACCOUNT_ID="acct"
    )
    first = _run("batch", "scale", MODEL, str(inputs), "-o", str(output), env=env)
    assert first.returncode == 0, first.stderr
    summary, totals, figures = first.stderr.splitlines()  # not a terminal: no progress bar, only the summary
    assert summary.startswith("20 done, 0 failed, 0 skipped")
    assert totals.startswith(f"{output}: 20 results: 20 succeeded, 0 failed; ")
    assert figures.startswith("20 requests (0 got 429, 0 retries): ")
    second = _run("batch", "scale", MODEL, str(inputs), "-o", str(output), "--progress", env=env)
    assert second.returncode == 0
    assert "0 done, 0 failed, 20 skipped" in second.stderr
    assert len(_results(output)) == 20
    assert counted_sandbox.stats().requests == 20


def test_the_progress_bar_shows_rate_and_eta_when_asked(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 10)
    run = _run(
        "batch", "scale", MODEL, str(inputs), "-o", str(output), "--progress", *_scale_flags(counted_sandbox)
    )
    assert run.returncode == 0
    assert "10/10" in run.stderr
    assert "prompt/s" in run.stderr


def _line(line_id: object, words: int) -> str:
    """An input whose prompt is ``words`` words long, so its result's prompt_tokens tell which it was."""
    return json.dumps({"id": line_id, "prompt": " ".join(["Alice"] * words), "max_tokens": 1})


def test_ids_are_copied_and_resume_matches_them_after_lines_were_inserted(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    words = {"a": 1, 7: 2, "c": 3, 0: 4}  # string and integer ids
    inputs.write_text("".join(_line(i, n) + "\n" for i, n in words.items()))
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    assert main(command) == 0
    first = {r["id"]: r for r in _results(output)}
    assert {i: r["prompt_tokens"] for i, r in first.items()} == words
    assert {i: r["index"] for i, r in first.items()} == {"a": 0, 7: 1, "c": 2, 0: 3}

    words.update({"new": 5, "7": 6})  # "7" is not 7
    edited = ["new", "a", 7, "7", "c", 0]  # every old line has moved
    inputs.write_text("".join(_line(i, words[i]) + "\n" for i in edited))
    counted_sandbox.reset_stats()
    capsys.readouterr()
    assert main(command) == 0
    assert "2 done, 0 failed, 4 skipped" in capsys.readouterr().err
    assert counted_sandbox.stats().requests == 2  # only the new ids were sent
    results = _results(output)
    assert sorted(map(str, (r["id"] for r in results))) == sorted(map(str, edited))  # each once
    assert {(type(r["id"]), r["id"]): r["prompt_tokens"] for r in results} == {
        (type(i), i): n for i, n in words.items()
    }


def test_a_line_without_an_id_is_matched_by_its_index(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    plain = json.dumps({"prompt": "Alice Alice Alice", "max_tokens": 1})
    inputs.write_text(f"{_line('x', 1)}\n{plain}\n")
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    assert main(command) == 0
    assert [("id" in r, r["index"]) for r in _results(output)] == [(True, 0), (False, 1)]

    inputs.write_text(f"{_line('y', 2)}\n{_line('x', 1)}\n{plain}\n")  # the id-less line moved to 2
    counted_sandbox.reset_stats()
    capsys.readouterr()
    assert main(command) == 0
    assert "2 done, 0 failed, 1 skipped" in capsys.readouterr().err  # y, and the line now at index 2
    assert counted_sandbox.stats().requests == 2


def test_duplicate_and_mistyped_ids_are_bad_lines_and_the_run_goes_on(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [_line("a", 1), _line("a", 2), _line(True, 1), _line(1.5, 1), _line(None, 1), _line([1], 1)]
    lines.append(_line(2, 3))
    inputs.write_text("\n".join(lines) + "\n")
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    assert main(command) == 1
    err = capsys.readouterr().err
    assert f'{inputs}:2: duplicate "id" "a": an earlier line has it' in err
    assert f'{inputs}:3: "id" must be a string or an integer, not a boolean' in err
    assert f'{inputs}:4: "id" must be a string or an integer, not a number' in err
    assert f'{inputs}:5: "id" must be a string or an integer, not null' in err
    assert f'{inputs}:6: "id" must be a string or an integer, not an array' in err
    assert "2 done, 5 failed, 0 skipped" in err
    results = {r["index"]: r for r in _results(output)}
    assert [results[0]["id"], results[6]["id"]] == ["a", 2]
    for index, written in zip(range(1, 6), ["a", True, 1.5, None, [1]], strict=True):
        assert (
            results[index]["id"] == written
        )  # copied as written, for a join; the line is known by its index
        assert results[index]["error"]["type"] == "InputLineError"  # type: ignore[index]

    assert main(command) == 1  # resume: the duplicate is still found, and still done
    assert "0 done, 0 failed, 7 skipped (already in" in capsys.readouterr().err


def _write_inputs_with_ids(path: Path, n: int) -> None:
    path.write_text("".join(_line(f"q{i}", 1 + i % 5) + "\n" for i in range(n)))


def _by_id(path: Path) -> dict[object, dict[str, object]]:
    """The output's results by id, failing if an id appears twice."""
    results = _results(path)
    by_id = {r["id"]: r for r in results}
    assert len(by_id) == len(results), "an id appears twice"
    return by_id


def test_retry_failed_sends_exactly_the_failures_again(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs_with_ids(inputs, 40)
    with inputs.open("a") as f:
        f.write('{"prompt": "no id", "max_tokens": 1}\n{"id": "q0", "prompt": "a duplicate"}\n')
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    counted_sandbox.inject(status=400, rate=0.3, api="scale")
    assert main(command) == 1
    counted_sandbox.clear_faults()
    first = _results(output)
    failed = [r for r in first if r["error"] is not None]
    assert 2 <= len(failed) < len(first)
    capsys.readouterr()
    counted_sandbox.reset_stats()

    assert main([*command, "--retry-failed"]) == 1  # the duplicate still fails
    err = capsys.readouterr().err
    assert f"{len(failed)} failed results removed" in err
    assert f"{len(failed) - 1} done, 1 failed, {len(first) - len(failed)} skipped" in err
    assert counted_sandbox.stats().requests == len(failed) - 1  # the duplicate is not sent
    after = _results(output)
    assert after[: len(first) - len(failed)] == [r for r in first if r["error"] is None]  # kept as they were
    assert sorted(r["index"] for r in after) == list(range(42))  # each input once
    [error] = [r for r in after if r["error"] is not None]
    assert error["index"] == 41


@pytest.mark.serial  # killed while it runs
def test_retry_failed_killed_mid_run_loses_nothing_and_a_rerun_completes_it(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs_with_ids(inputs, 120)
    counted_sandbox.inject(status=400, rate=0.5, api="scale")
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    assert main(command) == 1
    counted_sandbox.clear_faults()
    first = _by_id(output)
    succeeded = {i: r for i, r in first.items() if r["error"] is None}
    assert len(first) == 120
    assert len(first) - len(succeeded) >= 20

    counted_sandbox.inject(delay=0.05, rate=1.0, api="scale")  # slow enough to kill it part-way
    inode = output.stat().st_ino
    argv = [sys.executable, "-m", "wrapper", *command, "--retry-failed", "--concurrency", "2"]
    with subprocess.Popen(argv, env=_env(), stderr=subprocess.DEVNULL) as retry:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            output.stat().st_ino == inode
            or output.read_bytes().count(b"\n") < 1 + len(succeeded) + 4  # the record
        ):
            time.sleep(0.01)
        retry.send_signal(signal.SIGKILL)
    assert retry.returncode == -signal.SIGKILL
    killed = _by_id(output)
    assert len(succeeded) + 4 <= len(killed) < 120  # rewritten without the failures, then part re-sent
    assert {i: killed[i] for i in succeeded} == succeeded  # no earlier result lost
    assert all(r["error"] is None for r in killed.values())
    counted_sandbox.clear_faults()

    resumed = _run(*command)
    assert resumed.returncode == 0, resumed.stderr
    final = _by_id(output)
    assert sorted(final) == sorted(first)  # every id exactly once
    assert {i: final[i] for i in killed} == killed
    assert all(r["prompt_tokens"] == 1 + int(str(i)[1:]) % 5 for i, r in final.items())  # its own prompt


def test_rpm_and_tpm_are_the_batch_limits(
    counted_sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 3)
    seen: list[dict[str, object]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return acomplete_jobs(*args, **kwargs)

    monkeypatch.setattr(_batch_command, "acomplete_jobs", spy)
    command = ["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]
    assert main([*command, "--rpm", "6000", "--tpm", "1e6"]) == 0
    assert len(_results(output)) == 3
    assert main(command) == 0  # no limit given
    assert [(k.get("requests_per_minute"), k.get("tokens_per_minute")) for k in seen] == [
        (6000.0, 1e6),
        (None, None),
    ]


def test_the_summary_gives_the_batch_figures(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 10)
    counted_sandbox.inject(status=429, retry_after=0, count=2, api="scale")
    assert (
        main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]) == 0
    )
    done, _, figures = capsys.readouterr().err.splitlines()
    assert done.startswith("10 done, 0 failed, 0 skipped")
    shown = re.fullmatch(
        r"12 requests \(2 got 429, 2 retries\): ([\d.]+) requests/min, (\d+) tokens/min, "
        r"latency p50 ([\d.]+)s, p95 ([\d.]+)s",
        figures,
    )
    assert shown is not None, figures
    rpm, tpm, p50, p95 = map(float, shown.groups())
    assert rpm > 0
    assert tpm > rpm  # each request used several tokens (prompt 3 + 2 generated)
    assert 0 < p50 <= p95

    assert (
        main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *_scale_flags(counted_sandbox)]) == 0
    )
    nothing_sent, totals = capsys.readouterr().err.splitlines()  # no request, no figures
    assert nothing_sent.startswith("0 done, 0 failed, 10 skipped")
    assert totals.startswith(f"{output}: 10 results: 10 succeeded")


def test_each_result_carries_the_request_id_of_its_own_request(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text("".join(_line(f"q{n}", n) + "\n" for n in range(1, 7)) + '{"prompt": ""}\n')
    counted_sandbox.inject(status=400, count=1, api="scale")
    with request_id_proxy(counted_sandbox.scale_base_url) as (url, issued):
        flags = ["--api-key", "k", "--account-id", "a", "--base-url", url]
        assert main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *flags]) == 1
        results = {r["index"]: r for r in _results(output)}
        assert len(issued) == 6
        for result in (results[index] for index in range(6)):
            sent = json.loads(issued[str(result["request_id"])])
            assert sent["prompt"] == " ".join(["Alice"] * int(str(result["id"])[1:]))
        failed = [results[index]["error"] is not None for index in range(6)]
        assert sum(failed) == 1  # the 400 has its request id too
        assert results[6]["request_id"] is None  # a bad line is never sent

        capsys.readouterr()
        assert main(["complete", "scale", MODEL, "Alice", "--json", *flags]) == 0
        line = json.loads(capsys.readouterr().out)
        assert json.loads(issued[line["request_id"]])["prompt"] == "Alice"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["batch", "scale", MODEL, "in.jsonl"], "-o/--output"),
        (["batch", "openai", MODEL, "in.jsonl", "-o", "out.jsonl"], "invalid choice: 'openai'"),
        (["complete", "scale", MODEL, "hi", "--concurrency", "3"], "unrecognized arguments: --concurrency"),
        (["complete", "scale", MODEL, "hi", "--max-tokens", "1.5"], "--max-tokens: not an integer: '1.5'"),
        (
            ["complete", "gradient", "nous-hermes2", "hi", "--max-tokens", "0"],
            "max_generated_token_count must",
        ),
        (["complete", "scale", MODEL, "hi", "--param", "bogus=1"], "unexpected keyword argument 'bogus'"),
        (["complete", "scale", MODEL, "hi", "--temperature", "9"], "temperature must satisfy"),
        (["complete", "gradient", "nous-hermes2", "hi", "--stop", "x"], "unrecognized arguments: --stop"),
        (["complete", "scale", MODEL, "hi", "--base-url", "http://127.0.0.1:9"], "SGP_API_KEY"),
        ([], "required: COMMAND"),
        (["batch", "scale", MODEL, "i", "-o", "o", "--rpm", "0"], "--rpm: must be a number above 0, got 0"),
        (["batch", "scale", MODEL, "i", "-o", "o", "--rpm", "-5"], "--rpm: must be a number above 0, got -5"),
        (["batch", "scale", MODEL, "i", "-o", "o", "--tpm", "lots"], "--tpm: not a number: 'lots'"),
        (
            ["batch", "scale", MODEL, "i", "-o", "o", "--tpm", "nan"],
            "--tpm: must be a number above 0, got nan",
        ),
        (
            ["batch", "scale", MODEL, "i", "-o", "o", "--tpm", "inf"],
            "--tpm: must be a number above 0, got inf",
        ),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.MonkeyPatch.context() as env:
        env.delenv("SGP_API_KEY", raising=False)
        with pytest.raises(SystemExit) as exited:
            main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_input_file_is_a_usage_error(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    code = main(
        [
            "batch",
            "scale",
            MODEL,
            str(tmp_path / "nope.jsonl"),
            "-o",
            str(tmp_path / "o"),
            *_scale_flags(counted_sandbox),
        ]
    )
    assert code == 2
    assert not (tmp_path / "o").exists()  # found before the output was created


def test_complete_stream_prints_the_text_as_it_comes(counted_sandbox: Sandbox) -> None:
    flags = [*_scale_flags(counted_sandbox), "--temperature", "0", "--max-tokens", "12"]
    streamed = _run("complete", "scale", MODEL, "Alice was", "--stream", *flags)
    whole = _run("complete", "scale", MODEL, "Alice was", *flags)
    assert streamed.returncode == whole.returncode == 0, streamed.stderr
    assert streamed.stdout.strip()
    assert streamed.stdout == whole.stdout


def test_complete_gradient_as_json(counted_sandbox: Sandbox, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--base-url", counted_sandbox.gradient_base_url, "--access-token", "t", "--workspace-id", "w"]
    assert (
        main(
            [
                "complete",
                "gradient",
                "nous-hermes2",
                "Is the sky blue?",
                "--guidance",
                "yes",
                "--guidance",
                "no",
                "--json",
                *flags,
            ]
        )
        == 0
    )
    line = json.loads(capsys.readouterr().out)
    assert line["index"] == 0
    assert line["text"] in ("yes", "no")


def test_an_api_error_exits_1_and_never_shows_the_secret(counted_sandbox: Sandbox) -> None:
    counted_sandbox.inject(status=400, count=1, api="scale")
    run = _run("complete", "scale", MODEL, "hi", *_scale_flags(counted_sandbox))
    assert run.returncode == 1
    assert "BadRequestError (400)" in run.stderr
    assert "sekrit" not in run.stderr + run.stdout


def test_a_credential_the_server_echoes_is_in_no_result_line_nor_message(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every way the server quotes the key (escaped, encoded, across a cut, in a garbled status line) is
    scrubbed from the error lines of the results file and from what the command prints."""
    key = ESCAPED_CREDENTIALS["scale"]["api_key"]
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, len(ECHOES))
    server.script(*map(echo_secret_reply, ECHOES))
    flags = ["--base-url", server.url, "--api-key", key, "--account-id", "acct", "--max-retries", "0"]
    assert main(["batch", "scale", MODEL, str(inputs), "-o", str(output), "--concurrency", "1", *flags]) == 1
    assert main(["complete", "scale", MODEL, "hi", *flags]) == 1  # the last answer again: a status line
    errors = [line["error"]["message"] for line in _results(output)]  # type: ignore[index]
    assert len(errors) == len(ECHOES)
    assert all("<redacted>" in message for message in errors)
    texts = [output.read_text(), *capsys.readouterr()]
    assert [part for part in fragments(key) if any(part in text for text in texts)] == []


def test_sandbox_hands_every_argument_to_the_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sandbox", "--help"])
    assert exited.value.code == 0
    assert "python -m wrapper.sandbox" in capsys.readouterr().out


def test_on_a_terminal_the_progress_bar_shows_by_itself(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_inputs(inputs, 10)
    terminal, stderr = pty.openpty()
    fcntl.ioctl(stderr, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # rows, columns
    command = [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, str(inputs), "-o", str(output)]
    with subprocess.Popen(
        [*command, *_scale_flags(counted_sandbox)], stderr=stderr, stdout=subprocess.DEVNULL
    ) as run:
        os.close(stderr)
        shown = b""
        with contextlib.suppress(OSError):  # EIO once the child has closed its end
            while chunk := os.read(terminal, 4096):
                shown += chunk
    os.close(terminal)
    assert run.returncode == 0
    assert b"10/10" in shown
    assert b"prompt/s" in shown


def test_the_command_line_imports_tqdm_and_the_sandbox_only_when_needed() -> None:
    heavy = "{'tqdm', 'wrapper.sandbox', 'aiohttp'}"
    probe = f"import sys, wrapper.__main__; print(sorted({heavy} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
