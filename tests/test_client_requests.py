"""What the clients put on the wire and what they return, sync and async, mocked and over a real socket."""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType
from typing import Any

import httpx
import pytest
from helpers import (
    GRADIENT_BODY,
    GRADIENT_TOKEN,
    SCALE_KEY,
    LocalServer,
    call,
    collect,
    json_reply,
    scale_body,
)

import wrapper
import wrapper.gradient
import wrapper.scale
from wrapper import Completion, CompletionChunk, TokenLogprob
from wrapper._generated.gradient.models import CompleteModelSuccess
from wrapper._generated.scale.models import CompletionResponse
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.scale import AsyncScale, Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

SCALE_PARAMS: dict[str, Any] = {
    "max_tokens": 32,
    "temperature": 0.5,
    "stop_sequences": ("\n", "END"),
    "top_p": 0.9,
    "top_k": 40,
    "frequency_penalty": -0.5,
    "presence_penalty": 1.5,
    "logprobs": True,
    "top_logprobs": 3,
    "chat_template": "{{ prompt }}",
    "chat_template_kwargs": {"add_generation_prompt": True, "depth": 2},
    "reasoning_effort": "medium",
    "model_request_parameters": {"bindings": {"name": "Ada", "n": 3, "ratio": 0.5, "flag": False}},
}
SCALE_WIRE = {
    **SCALE_PARAMS,
    "prompt": "What is the capital of France?",
    "stop_sequences": ["\n", "END"],
}
GRADIENT_PARAMS: dict[str, Any] = {
    "max_generated_token_count": 8,
    "temperature": 0.7,
    "top_k": 5,
    "top_p": 0.95,
    "auto_template": False,
    "guidance": ["yes", "no"],
    "rag_collection": "collection-1",
}
GRADIENT_WIRE = {
    "query": "Is the sky blue?",
    "maxGeneratedTokenCount": 8,
    "temperature": 0.7,
    "topK": 5,
    "topP": 0.95,
    "autoTemplate": False,
    "guidance": {"type": "choice", "value": ["yes", "no"]},
    "rag": {"collectionId": "collection-1"},
}


class Recorder:
    """A MockTransport handler that records requests and answers with one JSON body."""

    def __init__(self, body: Any, status: int = 200) -> None:
        self.body, self.status = body, status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.body)

    @property
    def sent(self) -> Any:
        return json.loads(self.requests[-1].content)


async def test_scale_sends_every_parameter_by_its_spec_name(make_client: Any, mode: str) -> None:
    recorder = Recorder(scale_body())
    client = make_client("scale", mode, recorder, base_url="https://sgp.test/")
    await call(client.complete("team/model 1", "What is the capital of France?", **SCALE_PARAMS))
    request = recorder.requests[0]
    assert request.method == "POST"
    assert request.url.raw_path == b"/v4/models/team%2Fmodel%201/completions"
    assert request.url.host == "sgp.test"
    assert request.headers["x-api-key"] == SCALE_KEY
    assert request.headers["x-selected-account-id"] == "acct-1"
    assert request.headers["content-type"] == "application/json"
    assert recorder.sent == SCALE_WIRE
    assert json.loads(request.content)["top_k"] == 40  # types survive: ints stay ints, bools stay bools


async def test_scale_sends_only_the_fields_given(make_client: Any, mode: str) -> None:
    recorder = Recorder(scale_body())
    client = make_client("scale", mode, recorder, api_key="k", account_id=None)
    await call(client.complete("m", "hi", temperature=None, max_tokens=None))
    assert recorder.sent == {"prompt": "hi"}
    assert "x-selected-account-id" not in recorder.requests[0].headers


async def test_each_call_goes_to_its_own_models_path_and_workspace(make_client: Any, mode: str) -> None:
    """A model's path is worked out once and kept: calls alternating between models, and a client of
    another workspace calling the same model, each still send their own."""
    scale_recorder, gradient_recorder = Recorder(scale_body()), Recorder(GRADIENT_BODY)
    scale = make_client("scale", mode, scale_recorder, base_url="https://sgp.test")
    for model in ["a/1", "b 2", "a/1", "b 2"]:
        await call(scale.complete(model, f"to {model}"))
    paths = [
        (request.url.raw_path, json.loads(request.content)["prompt"]) for request in scale_recorder.requests
    ]
    assert (
        paths
        == [
            (b"/v4/models/a%2F1/completions", "to a/1"),
            (b"/v4/models/b%202/completions", "to b 2"),
        ]
        * 2
    )
    for workspace in ["ws-1", "ws-2"]:
        gradient = make_client("gradient", mode, gradient_recorder, workspace_id=workspace)
        await call(gradient.complete("m", "hi"))
    assert [request.headers["x-gradient-workspace-id"] for request in gradient_recorder.requests] == [
        "ws-1",
        "ws-2",
    ]


async def test_gradient_sends_every_parameter_in_camel_case(make_client: Any, mode: str) -> None:
    recorder = Recorder(GRADIENT_BODY)
    client = make_client("gradient", mode, recorder, base_url="https://gradient.test/api")
    await call(client.complete("base/model 1", "Is the sky blue?", **GRADIENT_PARAMS))
    request = recorder.requests[0]
    assert request.url.raw_path == b"/api/models/base%2Fmodel%201/complete"
    assert request.headers["authorization"] == f"Bearer {GRADIENT_TOKEN}"
    assert request.headers["x-gradient-workspace-id"] == "ws-1"
    assert recorder.sent == GRADIENT_WIRE


async def test_gradient_sends_only_the_fields_given(make_client: Any, mode: str) -> None:
    recorder = Recorder(GRADIENT_BODY)
    client = make_client("gradient", mode, recorder)
    await call(client.complete("m", "q", auto_template=None))
    assert recorder.sent == {"query": "q"}  # not even the spec's default autoTemplate


async def test_scale_result(make_client: Any, mode: str) -> None:
    logprobs = {
        "content": [
            {"token": "Par", "logprob": -0.1, "top_logprobs": [{"token": "Par", "logprob": -0.1}]},
            {"token": "is", "logprob": -0.2, "bytes": [105, 115], "top_logprobs": []},
        ]
    }
    body = scale_body(
        "Paris", prompt_tokens=7, response_tokens=2, choices=[{"index": 0, "logprobs": logprobs}]
    )
    client = make_client("scale", mode, Recorder(body))
    result = await call(client.complete("m", "p"))
    assert result == Completion(
        text="Paris",
        finish_reason="stop",
        prompt_tokens=7,
        response_tokens=2,
        logprobs=(TokenLogprob("Par", -0.1, (("Par", -0.1),)), TokenLogprob("is", -0.2, ())),
        raw=None,  # type: ignore[arg-type]  # raw is not compared
    )
    assert isinstance(result.raw, CompletionResponse)
    assert result.raw.prompt_tokens == 7
    assert hash(result) == hash(result)


@pytest.mark.parametrize(
    ("completions", "text"), [([], ""), ([["p", []]], ""), ([["p", ["a", "b"]], ["q", ["c"]]], "a")]
)
async def test_scale_text_is_the_first_output_of_the_first_prompt(
    make_client: Any, completions: list[Any], text: str
) -> None:
    client = make_client("scale", "sync", Recorder({"completions": completions}))
    result = client.complete("m", "p")
    assert (result.text, result.finish_reason, result.prompt_tokens, result.logprobs) == (
        text,
        None,
        None,
        None,
    )


async def test_gradient_result(make_client: Any, mode: str) -> None:
    client = make_client("gradient", mode, Recorder(GRADIENT_BODY))
    result = await call(client.complete("m", "q"))
    assert (
        result.text,
        result.finish_reason,
        result.prompt_tokens,
        result.response_tokens,
        result.logprobs,
    ) == (
        "yes",
        "stop",
        None,
        None,
        None,
    )
    assert isinstance(result.raw, CompleteModelSuccess)


async def test_gradient_stream_is_one_chunk(make_client: Any, mode: str) -> None:
    recorder = Recorder(GRADIENT_BODY)
    client = make_client("gradient", mode, recorder)
    chunks = await collect(client.stream("m", "q", max_generated_token_count=3))
    assert chunks == [CompletionChunk("yes", "stop", None, None, None, raw=None)]  # type: ignore[arg-type]
    assert recorder.sent == {"query": "q", "maxGeneratedTokenCount": 3}
    assert "one chunk" in Gradient.stream.__doc__
    assert "one chunk" in AsyncGradient.stream.__doc__


async def test_unknown_keyword_is_a_type_error(make_client: Any, mode: str) -> None:
    recorder = Recorder(scale_body())
    client = make_client("scale", mode, recorder)
    with pytest.raises(TypeError, match="stream"):
        await call(client.complete("m", "p", stream=True))
    assert recorder.requests == []


@pytest.mark.usefixtures("clean_env")
def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder(scale_body())
    monkeypatch.setenv("SGP_API_KEY", "env-key")
    monkeypatch.setenv("SGP_ACCOUNT_ID", "env-account")
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", "https://env.scale.test")
    with Scale(http_client=httpx.Client(transport=httpx.MockTransport(recorder))) as scale:
        scale.complete("m", "p")
    request = recorder.requests[0]
    assert str(request.url) == "https://env.scale.test/v4/models/m/completions"
    assert (request.headers["x-api-key"], request.headers["x-selected-account-id"]) == (
        "env-key",
        "env-account",
    )

    recorder = Recorder(GRADIENT_BODY)
    monkeypatch.setenv("GRADIENT_ACCESS_TOKEN", "env-token")
    monkeypatch.setenv("GRADIENT_WORKSPACE_ID", "env-ws")
    monkeypatch.setenv("GRADIENT_API_URL", "https://env.gradient.test/api/")
    with Gradient(http_client=httpx.Client(transport=httpx.MockTransport(recorder))) as gradient:
        gradient.complete("m", "q")
    request = recorder.requests[0]
    assert str(request.url) == "https://env.gradient.test/api/models/m/complete"
    assert request.headers["authorization"] == "Bearer env-token"
    assert request.headers["x-gradient-workspace-id"] == "env-ws"


@pytest.mark.usefixtures("clean_env")
def test_arguments_beat_the_environment_and_defaults_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", "https://env.scale.test")
    with Scale(api_key="k", base_url="https://arg.test") as scale:
        assert scale.base_url == "https://arg.test"
    monkeypatch.delenv("SGP_CLIENT_BASE_URL")
    with Scale(api_key="k") as scale, Gradient(access_token="t", workspace_id="w") as gradient:
        assert (scale.base_url, gradient.base_url) == (
            "https://api.egp.scale.com",
            "https://api.gradient.ai/api",
        )
        assert (scale.max_retries, gradient.max_retries) == (2, 2)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("cls", "arguments", "env", "argument"),
    [
        (Scale, {}, "SGP_API_KEY", "api_key"),
        (AsyncScale, {}, "SGP_API_KEY", "api_key"),
        (Gradient, {"workspace_id": "w"}, "GRADIENT_ACCESS_TOKEN", "access_token"),
        (AsyncGradient, {"workspace_id": "w"}, "GRADIENT_ACCESS_TOKEN", "access_token"),
        (Gradient, {"access_token": "t"}, "GRADIENT_WORKSPACE_ID", "workspace_id"),
    ],
)
def test_missing_credential_names_the_argument_and_the_variable(
    cls: Any, arguments: dict[str, str], env: str, argument: str
) -> None:
    with pytest.raises(ValueError, match=f"{argument}=.*{env}"):
        cls(**arguments)


async def test_with_options_copies_share_the_pool(make_client: Any, mode: str) -> None:
    recorder = Recorder(scale_body())
    client = make_client("scale", mode, recorder, timeout=10.0)
    quick = client.with_options(timeout=1.5, max_retries=0)
    assert (quick.max_retries, quick.timeout, client.max_retries, client.timeout) == (
        0,
        httpx.Timeout(1.5),
        2,
        httpx.Timeout(10.0),
    )
    await call(quick.complete("m", "p"))
    await call(client.complete("m", "p"))
    assert [r.extensions["timeout"]["read"] for r in recorder.requests] == [1.5, 10.0]
    assert client.with_options(max_retries=5).timeout == httpx.Timeout(10.0)
    with pytest.raises(ValueError, match="max_retries"):
        client.with_options(max_retries=-1)
    await call(quick.close())  # one pool, the client's: closing the copy closes the copy alone
    with pytest.raises(RuntimeError, match="is closed"):
        await call(quick.complete("m", "p"))
    await call(client.complete("m", "p"))
    await call(client.close())
    with pytest.raises(RuntimeError, match="is closed"):
        await call(client.with_options(max_retries=1).complete("m", "p"))
    assert len(recorder.requests) == 3


async def test_context_managers_close_the_pool(sleeps: list[float]) -> None:
    with Scale(api_key="k") as scale:
        pass
    with pytest.raises(RuntimeError, match="is closed"):
        scale.complete("m", "p")
    async with AsyncGradient(access_token="t", workspace_id="w") as gradient:
        pass
    with pytest.raises(RuntimeError, match="is closed"):
        await gradient.complete("m", "p")
    custom = httpx.AsyncClient()
    async with AsyncScale(api_key="k", http_client=custom):
        pass
    assert custom.is_closed


# --- over a real socket -----------------------------------------------------------------------------


async def test_round_trip_over_a_socket(make_client: Any, server: LocalServer, mode: str) -> None:
    """Sync on httpx's pool, async on the default aiohttp fast lane."""
    server.script(json_reply(200, scale_body("Paris", prompt_tokens=5, response_tokens=1)))
    scale = make_client("scale", mode, base_url=server.url)
    result = await call(scale.complete("my/deploy", "Capital?", max_tokens=4, stop_sequences=["."]))
    assert (result.text, result.prompt_tokens, result.response_tokens) == ("Paris", 5, 1)
    method, path, headers, body = server.requests[0]
    assert (method, path) == ("POST", "/v4/models/my%2Fdeploy/completions")
    assert headers["x-api-key"] == SCALE_KEY
    assert headers["x-selected-account-id"] == "acct-1"
    assert body == {"prompt": "Capital?", "max_tokens": 4, "stop_sequences": ["."]}

    server.script(json_reply(200, GRADIENT_BODY))
    gradient = make_client("gradient", mode, base_url=server.url + "/api")
    result = await call(gradient.complete("m1", "Sky?", guidance=["yes", "no"], top_k=2))
    assert result.text == "yes"
    method, path, headers, body = server.requests[1]
    assert path == "/api/models/m1/complete"
    assert headers["authorization"] == f"Bearer {GRADIENT_TOKEN}"
    assert headers["x-gradient-workspace-id"] == "ws-1"
    assert body == {"query": "Sky?", "guidance": {"type": "choice", "value": ["yes", "no"]}, "topK": 2}


@pytest.mark.usefixtures("clean_env")
def test_module_level_functions_use_a_default_client(
    server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SGP_API_KEY", "env-key")
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", server.url)
    monkeypatch.setenv("GRADIENT_ACCESS_TOKEN", "env-token")
    monkeypatch.setenv("GRADIENT_WORKSPACE_ID", "env-ws")
    monkeypatch.setenv("GRADIENT_API_URL", server.url + "/api")
    try:
        server.script(json_reply(200, scale_body("one")))
        assert wrapper.scale.complete("m", "p", max_tokens=1).text == "one"
        assert wrapper.scale._default.get() is wrapper.scale._default.get()
        server.script(json_reply(200, GRADIENT_BODY))
        assert [c.text for c in wrapper.gradient.stream("m", "q")] == ["yes"]
        assert wrapper.gradient.complete("m", "q").text == "yes"
    finally:
        wrapper.scale._default.close()
        wrapper.gradient._default.close()
    assert [r[1] for r in server.requests] == [
        "/v4/models/m/completions",
        "/api/models/m/complete",
        "/api/models/m/complete",
    ]
    assert server.requests[0][2]["x-api-key"] == "env-key"


def test_importing_the_clients_stays_light(library: ModuleType) -> None:
    """No sandbox, CLI or test-only packages; aiohttp is loaded here, so that a first async client built
    inside a running loop imports nothing there (tests/test_event_loops.py); httpx2 only when asked for
    (``COMPLETION_CLIENTS_HTTP``), and then ahead too."""
    code = "import sys, wrapper, wrapper.scale, wrapper.gradient, wrapper.errors; print(sorted(sys.modules))"
    loaded = set(json.loads(subprocess.check_output([sys.executable, "-c", code]).decode().replace("'", '"')))
    assert not loaded & {"starlette", "uvicorn", "tqdm", "yaml", "jsonschema", "pytest"}
    assert "aiohttp" in loaded
    if library.__name__ == "httpx2":
        assert {"httpx2", "httpcore2._backends.anyio"} <= loaded
    else:
        assert "httpx2" not in loaded
    assert wrapper.Completion is Completion


async def test_complete_many_delegates_to_the_batch_helper(make_client: Any, mode: str) -> None:
    recorder = Recorder(GRADIENT_BODY)
    client = make_client("gradient", mode, recorder)
    results = await collect(client.complete_many("m", ["a", "b", "c"], concurrency=2, ordered=True, top_k=1))
    assert [(r.index, r.completion.text) for r in results] == [(0, "yes"), (1, "yes"), (2, "yes")]
    assert sorted(json.loads(r.content)["query"] for r in recorder.requests) == ["a", "b", "c"]
    assert all(json.loads(r.content)["topK"] == 1 for r in recorder.requests)
