"""The command line as a new user meets it: credential errors, its names, the summary's advice, and a
batch that stops when its first answers all refuse it."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper._cli import main
from wrapper._cli._batch_command import REFUSALS_TO_STOP
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox

MODEL = "llama-3-8b-instruct"
SCRIPT = Path(sys.executable).with_name("completion-clients")  # pyproject's [project.scripts]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGP_", "GRADIENT_"))}
    return {**env, **extra}


def _results(path: Path) -> list[dict[str, Any]]:
    return list(read_results(str(path)))


def _write_prompts(path: Path, n: int) -> None:
    path.write_text("".join(json.dumps({"prompt": f"Alice {i}", "max_tokens": 1}) + "\n" for i in range(n)))


@pytest.mark.parametrize(
    ("args", "usage", "flag", "env"),
    [
        (["complete", "scale", MODEL, "hi"], "python -m wrapper complete scale", "--api-key", "SGP_API_KEY"),
        (
            ["batch", "scale", MODEL, "in.jsonl", "-o", "out.jsonl"],
            "python -m wrapper batch scale",
            "--api-key",
            "SGP_API_KEY",
        ),
        (
            ["complete", "gradient", "nous-hermes2", "hi", "--workspace-id", "w"],
            "python -m wrapper complete gradient",
            "--access-token",
            "GRADIENT_ACCESS_TOKEN",
        ),
        (
            ["complete", "gradient", "nous-hermes2", "hi", "--access-token", "t"],
            "python -m wrapper complete gradient",
            "--workspace-id",
            "GRADIENT_WORKSPACE_ID",
        ),
    ],
)
def test_a_missing_credential_names_the_flag_and_the_variable_under_the_subcommands_usage(
    args: list[str],
    usage: str,
    flag: str,
    env: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in list(os.environ):
        if name.startswith(("SGP_", "GRADIENT_")):
            monkeypatch.delenv(name)
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: {usage} [-h]")
    assert f"{usage}: error: " in err
    assert f"pass {flag} or set the {env} environment variable" in err
    assert "=..." not in err  # not the Python keyword's advice


def test_the_console_script_names_itself_and_has_a_version() -> None:
    version = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, timeout=30, env=_env())
    assert (version.returncode, version.stdout) == (
        0,
        f"completion-clients {importlib.metadata.version('completion-clients')}\n",
    )
    bare = subprocess.run([SCRIPT], capture_output=True, text=True, timeout=30, env=_env())
    assert bare.returncode == 2
    assert bare.stderr.startswith("usage: completion-clients [-h] [--version]")
    missing = subprocess.run(
        [SCRIPT, "complete", "scale", MODEL, "hi"], capture_output=True, text=True, timeout=30, env=_env()
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("usage: completion-clients complete scale")
    assert "python -m wrapper" not in missing.stderr


@pytest.mark.parametrize("spelled", ["--api-key", "--api-key="])
def test_the_summary_of_a_run_with_failures_gives_the_command_to_retry_them(
    counted_sandbox: Sandbox, tmp_path: Path, spelled: str
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, 6)
    counted_sandbox.inject(status=400, count=2, api="scale")
    key = ["--api-key=sekrit-key"] if spelled.endswith("=") else ["--api-key", "sekrit-key"]
    flags = ["--base-url", counted_sandbox.scale_base_url, *key, "--account-id", "acct"]
    run = subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, str(inputs), "-o", str(output), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
    )
    assert run.returncode == 1
    assert "sekrit" not in run.stderr
    hint = run.stderr.splitlines()[-1]
    shown = re.fullmatch(r"to send the 2 failed again: (python -m wrapper batch .* --retry-failed)", hint)
    assert shown is not None, run.stderr
    assert ' --api-key "$SGP_API_KEY" ' in shown[1] or ' --api-key="$SGP_API_KEY" ' in shown[1]

    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is this one
    counted_sandbox.reset_stats()
    again = subprocess.run(  # the hint, pasted into a shell that has the key in its environment
        shown[1],
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(PATH=path, SGP_API_KEY="k2"),
    )
    assert again.returncode == 0, again.stderr
    assert counted_sandbox.stats().requests == 2
    assert sorted(r["index"] for r in _results(output)) == list(range(6))
    assert all(r["error"] is None for r in _results(output))


def test_the_retry_hint_shows_no_variable_that_holds_another_credential(
    counted_sandbox: Sandbox, tmp_path: Path
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, 3)
    counted_sandbox.inject(status=400, count=1, api="scale")
    flags = ["--base-url", counted_sandbox.scale_base_url, "--api-key", "sandbox2", "--account-id", "acct"]
    run = subprocess.run(
        [sys.executable, "-m", "wrapper", "batch", "scale", MODEL, str(inputs), "-o", str(output), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(SGP_API_KEY="the-other-account", SGP_ACCOUNT_ID="acct"),
    )
    assert run.returncode == 1
    hint = run.stderr.splitlines()[-1]
    assert hint.startswith("to send the 1 failed again: python -m wrapper batch ")
    assert " --api-key '<API_KEY>' " in hint  # to fill in: $SGP_API_KEY holds another
    assert ' --account-id "$SGP_ACCOUNT_ID" ' in hint  # which holds this one
    assert "sandbox2" not in run.stderr
    assert "the-other-account" not in run.stderr


@pytest.mark.serial  # interrupted while it runs
def test_ctrl_c_says_what_was_done_and_the_run_resumes(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, 200)
    counted_sandbox.inject(delay=0.02, rate=1.0, api="scale")  # slow enough to interrupt part-way
    flags = ["--base-url", counted_sandbox.scale_base_url, "--api-key", "k", "--concurrency", "4"]
    command = [
        sys.executable,
        "-m",
        "wrapper",
        "batch",
        "scale",
        MODEL,
        str(inputs),
        "-o",
        str(output),
        *flags,
    ]
    with subprocess.Popen(command, env=_env(), stderr=subprocess.PIPE, text=True) as run:
        deadline = time.monotonic() + 30
        while (
            not output.exists() or output.read_bytes().count(b"\n") < 21
        ) and time.monotonic() < deadline:  # 20 results
            time.sleep(0.01)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=30)
    assert run.returncode == 130
    done = len(_results(output))
    assert 20 <= done < 200
    assert f"interrupted after {done} done, 0 failed: run it again to resume" in err
    assert f"{done} done, 0 failed, 0 skipped (already in {output})" in err
    assert "Traceback" not in err
    counted_sandbox.clear_faults()
    assert main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *flags]) == 0
    assert sorted(r["index"] for r in _results(output)) == list(range(200))


@pytest.fixture(scope="module")
def keyed() -> Iterator[Sandbox]:
    """A sandbox that takes only the Scale key ``right-key``."""
    with Sandbox(api_key="right-key") as sb:
        yield sb


def _batch(sb: Sandbox, inputs: Path, output: Path, key: str, model: str = MODEL) -> list[str]:
    flags = ["--base-url", sb.scale_base_url, "--api-key", key, "--account-id", "a", "--concurrency", "2"]
    return ["batch", "scale", model, str(inputs), "-o", str(output), *flags]


@pytest.mark.parametrize(
    ("key", "model", "refusal"),
    [
        ("wrong-key", MODEL, "AuthenticationError (401)"),
        ("right-key", "no-such-deployment", "NotFoundError (404)"),
    ],
)
def test_a_batch_whose_first_answers_all_refuse_it_stops_and_resumes_once_fixed(
    keyed: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, model: str, refusal: str
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, 100)
    keyed.reset_stats()
    flags = ["--base-url", keyed.scale_base_url, "--api-key", key, "--concurrency", "16"]
    command = [sys.executable, "-m", "wrapper", "batch", "scale", model, str(inputs), "-o", str(output)]
    stopped = subprocess.run([*command, *flags], capture_output=True, text=True, timeout=60, env=_env())
    assert stopped.returncode == 1
    assert f"stopped: the first {REFUSALS_TO_STOP} requests were refused, the first with {refusal}: " in (
        stopped.stderr
    )
    assert "nothing was written for them" in stopped.stderr
    assert "--retry-failed" not in stopped.stderr  # nothing failed that a retry would fix
    assert "Traceback" not in stopped.stderr  # the requests in flight were answered, not abandoned
    assert _results(output) == []
    assert keyed.stats().requests <= REFUSALS_TO_STOP - 1 + 16  # no more sent once it knew: not the file

    assert main(_batch(keyed, inputs, output, "right-key")) == 0  # fixed: the same command does it all
    assert "100 done, 0 failed, 0 skipped" in capsys.readouterr().err
    assert sorted(r["index"] for r in _results(output)) == list(range(100))


def test_a_short_batch_refused_throughout_stops_the_same_way(
    keyed: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, REFUSALS_TO_STOP - 2)
    assert main(_batch(keyed, inputs, output, "wrong-key")) == 1
    assert "stopped: every request was refused, the first with AuthenticationError (401)" in (
        capsys.readouterr().err
    )
    assert _results(output) == []


def test_refusals_among_answers_that_are_not_all_refusals_are_written_as_failures(
    counted_sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _write_prompts(inputs, 10)
    counted_sandbox.inject(status=403, count=REFUSALS_TO_STOP - 1, api="scale")
    flags = ["--base-url", counted_sandbox.scale_base_url, "--api-key", "k", "--concurrency", "1"]
    assert main(["batch", "scale", MODEL, str(inputs), "-o", str(output), *flags]) == 1
    err = capsys.readouterr().err
    assert "stopped" not in err
    assert f"{10 - (REFUSALS_TO_STOP - 1)} done, {REFUSALS_TO_STOP - 1} failed, 0 skipped" in err
    results = _results(output)
    assert sorted(r["index"] for r in results) == list(range(10))
    assert [r["error"]["status"] for r in results if r["error"] is not None] == [403] * (REFUSALS_TO_STOP - 1)
