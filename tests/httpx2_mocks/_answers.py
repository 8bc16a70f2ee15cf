"""What the tests of users' mocks share: the mocked API's answers, and the calls they check
(``tests/test_mocking.py`` for httpx's mocks, the files here for httpx2's).

The files here run by ``nox -s httpx2_mocks`` (one session a plugin: pytest-httpx2 and httpx2-pytest
both install the module ``pytest_httpx2`` and its fixture ``httpx2_mock``, so they cannot share an
environment); the suite's own run leaves them out (``collect_ignore`` in ``tests/conftest.py``).
"""

from __future__ import annotations

import inspect
import json
from types import ModuleType
from typing import Any

import httpx2

from wrapper.gradient import AsyncGradient, Gradient
from wrapper.scale import AsyncScale, Scale

BASE_URLS = {"scale": "https://scale.mocked.test", "gradient": "https://gradient.mocked.test/api"}
CLASSES = {"scale": (Scale, AsyncScale), "gradient": (Gradient, AsyncGradient)}
CREDENTIALS = {"scale": {"api_key": "sk-test"}, "gradient": {"access_token": "t", "workspace_id": "w"}}
CLIENTS = [(api, mode) for api in ("scale", "gradient") for mode in ("sync", "async")]
PROMPTS = ["one", "two", "a", "b", "c"]  # complete, stream, then the three of a batch


def answer(request: Any, library: ModuleType = httpx2) -> Any:
    """What the mocked API says, as a ``library.Response`` (respx's routes, pytest-httpx2's too, answer
    with httpx's): Scale streams when asked to; the body echoes the prompt."""
    body = json.loads(request.content)
    prompt = body.get("prompt", body.get("query"))
    headers = {"x-request-id": f"req-{prompt}"}
    if body.get("stream"):
        event = json.dumps({"completions": [[prompt, [f"mocked {prompt}"]]], "finish_reason": "stop"})
        headers["content-type"] = "text/event-stream"
        return library.Response(200, headers=headers, content=f"data: {event}\n\n".encode())
    if "query" in body:
        return library.Response(
            200, headers=headers, json={"finishReason": "stop", "generatedOutput": f"mocked {prompt}"}
        )
    output = {"completions": [[prompt, [f"mocked {prompt}"]]], "finish_reason": "stop"}
    return library.Response(200, headers=headers, json=output)


async def _call(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


async def exercise(api: str, mode: str) -> None:
    """``complete``, ``stream`` and ``complete_many`` on a default client; what each returned is checked."""
    client = CLASSES[api][mode == "async"](**CREDENTIALS[api], base_url=BASE_URLS[api], timeout=10)
    try:
        result = await _call(client.complete("m", "one"))
        assert (result.text, result.request_id) == ("mocked one", "req-one")
        stream = client.stream("m", "two")
        chunks = [c async for c in stream] if mode == "async" else list(stream)
        assert [c.text for c in chunks] == ["mocked two"]
        batch = client.complete_many("m", ["a", "b", "c"], ordered=True)
        results = [r async for r in batch] if mode == "async" else list(batch)
        assert [r.completion.text for r in results] == ["mocked a", "mocked b", "mocked c"]
    finally:
        await _call(client.close())


def prompts(requests: list[Any]) -> list[str]:
    """The prompts of the requests a mock saw, sorted (a batch sends its three at once)."""
    return sorted(json.loads(r.content).get("prompt", json.loads(r.content).get("query")) for r in requests)
