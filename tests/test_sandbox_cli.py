"""``python -m wrapper.sandbox``: its help, and a real server process that our client can use."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

pytestmark = pytest.mark.long("parallel")  # 54-75 s of one process in make test


def test_help_lists_the_models_the_rag_collection_the_triggers_and_the_faults() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", "--help"], capture_output=True, text=True, check=True
    )
    for expected in ("--port", "--seed", "--rpm", "--tpm", "--api-key", "--access-token", "--any-model",
                     "--max-body", "--client-timeout", "--log", "--fault", "compose", "Retry-After",
                     "nous-hermes2", "llama-3-8b-instruct", "wonderland", "contraband", "__fail__",
                     "x-sandbox-fault", "retry-after", "cut=K", "malformed"):  # fmt: skip
        assert expected in out.stdout


def test_help_is_plain_text_without_the_docstrings_markup() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", "--help"], capture_output=True, text=True, check=True
    )
    assert "``" not in out.stdout
    assert "\n- status=CODE: answer CODE with an error body of the API's shape;" in out.stdout


@contextmanager
def _cli_sandbox(*args: str, stderr: list[str] | None = None) -> Iterator[str]:
    """``python -m wrapper.sandbox --port 0 ARGS`` in a process of its own; its URL, read from its banner.
    Once it has stopped, what it wrote to stderr is appended to ``stderr``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "wrapper.sandbox", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # printed once the port is bound and listening
        shown = re.fullmatch(r"Sandbox: Gradient at (http://\S+)/api, Scale at (http://\S+)\n", banner)
        assert shown is not None, (banner, process.stderr.read() if process.stderr else "")
        assert shown[1] == shown[2]
        yield shown[1]
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=10)
        if stderr is not None:
            stderr.append(errors)


@pytest.fixture
def server_url() -> Iterator[str]:
    with _cli_sandbox("--seed", "3") as url:
        yield url


def test_the_cli_serves_both_apis(server_url: str) -> None:
    with Scale(api_key="k", account_id="a", base_url=server_url) as client:
        r = client.complete("mistral-7b-instruct", "Alice", max_tokens=5, temperature=0.0)
    assert r.text
    assert r.response_tokens == 5
    headers = {"authorization": "Bearer t", "x-gradient-workspace-id": "ws"}
    answer = httpx.post(
        f"{server_url}/api/models/nous-hermes2/complete", json={"query": "Alice"}, headers=headers
    )
    assert answer.json()["generatedOutput"]


def test_the_demo_shows_both_clients_and_exits_0() -> None:
    demo = Path(__file__).resolve().parents[1] / "examples" / "demo.py"
    run = subprocess.run([sys.executable, str(demo)], capture_output=True, text=True, timeout=60, check=True)
    for expected in ("Gradient completion", "guided choice", "ContentFlaggedError", "Scale completion",
                     "Scale stream", "finish reason", '{"index": ', "Sandbox stopped."):  # fmt: skip
        assert expected in run.stdout
    assert "200/200" in run.stderr  # the batch's progress bar
    assert "200 done, 0 failed, 0 skipped" in run.stderr
    assert "0 done, 0 failed, 200 skipped" in run.stderr  # the re-run resumes: nothing left to do


def test_a_busy_port_fails_at_once_naming_the_port_and_prints_no_banner() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run(
            [sys.executable, "-m", "wrapper.sandbox", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert run.returncode == 1
    assert run.stdout == ""  # no "running at" banner for a server that never ran
    assert run.stderr.startswith(f"python -m wrapper.sandbox: error: cannot listen on 127.0.0.1:{port}: ")
    assert "the port is busy" in run.stderr
    assert "Traceback" not in run.stderr


def test_several_fault_rules_given_at_start_all_fire() -> None:
    rules = ["--fault", "status=503;count=1", "--fault", "status=429;retry-after=0;count=2"]
    with _cli_sandbox(*rules) as url, httpx.Client(headers={"x-api-key": "k"}) as http:
        answers = [
            http.post(f"{url}/v4/models/llama-3-8b-instruct/completions", json={"prompt": "a"}).status_code
            for _ in range(3)
        ]
    assert answers == [503, 429, 200]  # both fired on the first request (the first rule's status won)


def test_a_bad_fault_rule_is_a_usage_error() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", "--fault", "status=oops"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert "--fault: 'status=oops'" in run.stderr


def test_log_max_body_and_client_timeout_set_the_request_log_and_the_guards() -> None:
    stderr: list[str] = []
    with _cli_sandbox("--log", "--max-body", "100", "--client-timeout", "0.5", stderr=stderr) as url:
        scale = f"{url}/v4/models/llama-3-8b-instruct/completions"
        headers = {"x-api-key": "k", "x-sandbox-fault": "status=503"}
        assert httpx.post(scale, json={"prompt": "Alice"}, headers=headers).status_code == 503
        assert httpx.post(scale, json={"prompt": "Alice" * 30}, headers=headers).status_code == 413
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as idle:
            assert idle.recv(1) == b""  # closed by the sandbox, well before the socket's 10 s
    lines = re.findall(r"POST /v4/models/llama-3-8b-instruct/completions .*", stderr[0])
    assert re.fullmatch(r"POST \S+ 503 \d+\.\d{3}s fault=status=503 id=sandbox-1", lines[0])
    assert re.fullmatch(r"POST \S+ 413 \d+\.\d{3}s id=sandbox-2", lines[1])


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--max-body", "0", "must be a whole number of bytes >= 1, not '0'"),
        ("--max-body", "1e6", "must be a whole number of bytes >= 1, not '1e6'"),
        ("--client-timeout", "0", "must be a positive number, not '0'"),
    ],
)
def test_a_bad_limit_is_a_usage_error(flag: str, value: str, why: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", flag, value], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2
    assert f"argument {flag}: {why}" in run.stderr


def test_only_the_credentials_given_are_accepted_and_any_model_id_is_served() -> None:
    with _cli_sandbox("--api-key", "right-key", "--access-token", "right-token", "--any-model") as url:
        scale = f"{url}/v4/models/model_deployment_id/completions"
        body = {"prompt": "Alice", "max_tokens": 2}
        refused = httpx.post(scale, json=body, headers={"x-api-key": "wrong-key"})
        missing = httpx.post(scale, json=body)
        served = httpx.post(scale, json=body, headers={"x-api-key": "right-key"})
        gradient = f"{url}/api/models/model_id/complete"
        headers = {"x-gradient-workspace-id": "w"}
        refused_token = httpx.post(
            gradient, json={"query": "Alice"}, headers={**headers, "authorization": "Bearer wrong"}
        )
        served_token = httpx.post(
            gradient, json={"query": "Alice"}, headers={**headers, "authorization": "Bearer right-token"}
        )
    assert (refused.status_code, refused.json()["detail"]) == (
        401,
        "Not authenticated: the API key sent was refused",
    )
    assert (missing.status_code, missing.json()["detail"]) == (
        401,
        "Not authenticated: send the x-api-key header",
    )
    assert served.status_code == 200
    assert served.json()["response_tokens"] == 2
    assert refused_token.status_code == 401
    assert refused_token.json()["message"] == "Not authenticated: the access token sent was refused"
    assert served_token.status_code == 200
    assert served_token.json()["generatedOutput"]


@pytest.mark.parametrize("command", [["wrapper.sandbox"], ["wrapper", "sandbox"]], ids=" ".join)
@pytest.mark.parametrize("when", ["while serving", "as it starts"])
def test_ctrl_c_stops_it_quietly_with_the_exit_status_of_an_interrupt(when: str, command: list[str]) -> None:
    """Ctrl-C is the documented way to stop it: one line on stderr, no traceback, exit status 130."""
    process = subprocess.Popen(
        [sys.executable, "-m", *command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        url = re.search(r"Scale at (http://\S+)", banner)
        assert url is not None, banner
        if when == "while serving":  # a request answered: the server's own signal handling is in place
            answer = httpx.post(
                f"{url[1]}/v4/models/llama-3-8b-instruct/completions",
                json={"prompt": "Alice", "max_tokens": 2},
                headers={"x-api-key": "k"},
            )
            assert answer.status_code == 200
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, out, err) == (130, "", "Sandbox stopped\n")


@pytest.mark.parametrize(
    ("port", "why"),
    [
        ("99999", "must be from 0 to 65535 (0: any free port), not 99999"),
        ("65536", "must be from 0 to 65535 (0: any free port), not 65536"),
        ("-1", "must be from 0 to 65535 (0: any free port), not -1"),
        ("http", "not an integer: 'http'"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error_naming_the_range(port: str, why: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", f"--port={port}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith("usage: python -m wrapper.sandbox")
    assert run.stderr.endswith(f"python -m wrapper.sandbox: error: argument --port: {why}\n")


def test_a_port_out_of_range_is_refused_in_python_too() -> None:
    with pytest.raises(ValueError, match=r"^port must be from 0 to 65535 \(0: any free port\), not 70000$"):
        Sandbox(port=70000).start()
