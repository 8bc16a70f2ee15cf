"""``python -m wrapper.sandbox``: its help, and a real server process that our client can use."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from wrapper.scale import Scale


def test_help_lists_the_models_the_rag_collection_the_triggers_and_the_faults() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wrapper.sandbox", "--help"], capture_output=True, text=True, check=True
    )
    for expected in ("--port", "--seed", "--rpm", "--tpm", "Retry-After", "nous-hermes2",
                     "llama-3-8b-instruct", "wonderland", "contraband", "__fail__", "x-sandbox-fault",
                     "retry-after", "cut=K", "malformed"):  # fmt: skip
        assert expected in out.stdout


@pytest.fixture
def server_url() -> Iterator[str]:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "wrapper.sandbox", "--port", str(port), "--seed", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                httpx.get(f"{url}/_sandbox/models")
                break
            except httpx.TransportError:
                assert process.poll() is None, "the sandbox exited"
                assert time.monotonic() < deadline, "the sandbox did not start in time"
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=10)


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
