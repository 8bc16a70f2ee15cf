"""The suite cannot hang: clients built in tests time out quickly, and a stuck batch fails its test."""

from __future__ import annotations

import pytest
from helpers import TEST_TIMEOUT

from wrapper.gradient import AsyncGradient
from wrapper.scale import Scale

pytest_plugins = ["pytester"]


def test_clients_built_without_a_timeout_get_the_suites_short_one() -> None:
    with Scale(api_key="k") as scale:
        assert scale.timeout == TEST_TIMEOUT
    assert AsyncGradient(access_token="t", workspace_id="w").timeout == TEST_TIMEOUT


@pytest.mark.timeout(60)
def test_a_sync_batch_stuck_on_the_network_fails_within_its_pytest_timeout(
    pytester: pytest.Pytester,
) -> None:
    """A server that accepts and never answers, a client with the library's 600 s read timeout: the
    test's own pytest-timeout must end it (the batch may not wait for its requests when it stops)."""
    pytester.makepyfile(
        """
        import socket

        from wrapper.scale import Scale


        def test_stuck():
            with socket.create_server(("127.0.0.1", 0)) as listener:
                port = listener.getsockname()[1]
                scale = Scale(api_key="k", base_url=f"http://127.0.0.1:{port}", timeout=600, max_retries=0)
                list(scale.complete_many("m", ["a", "b", "c"], concurrency=3))
        """
    )
    result = pytester.runpytest_subprocess("--timeout=3", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout*"])
