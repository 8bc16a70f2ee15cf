"""wrapper.llama_index: ScaleLLM and GradientLLM through LlamaIndex's own API, against the sandbox."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import respx
from helpers import install_command
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.constants import DEFAULT_CONTEXT_WINDOW, DEFAULT_NUM_OUTPUTS
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer
from pydantic import ValidationError

from wrapper import errors
from wrapper.gradient import Gradient
from wrapper.llama_index import GradientBaseModelLLM, GradientLLM, GradientModelAdapterLLM, ScaleLLM
from wrapper.sandbox import Sandbox
from wrapper.sandbox._registry import registry
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL = "llama-3-8b-instruct"
GRADIENT_MODEL = "nous-hermes2"
ADAPTER = "alice-adapter_model_adapter"
CREDENTIAL = "llama-index-tests"


@pytest.fixture
async def scale_llm(sandbox: Sandbox) -> AsyncIterator[ScaleLLM]:
    llm = ScaleLLM(
        model=SCALE_MODEL,
        api_key=CREDENTIAL,
        base_url=sandbox.scale_base_url,
        max_tokens=16,
        temperature=0,
        max_retries=0,
    )
    yield llm
    llm.close()
    await llm.aclose()


@pytest.fixture
async def gradient_llm(sandbox: Sandbox) -> AsyncIterator[GradientLLM]:
    llm = GradientBaseModelLLM(  # llama-index-llms-gradient's constructor arguments
        base_model_slug=GRADIENT_MODEL,
        access_token=CREDENTIAL,
        workspace_id=CREDENTIAL,
        host=sandbox.gradient_base_url,
        max_tokens=12,
        temperature=0,
    )
    yield llm
    llm.close()
    await llm.aclose()


def expected_scale(scale_client: Scale, prompt: str) -> Any:
    return scale_client.complete(SCALE_MODEL, prompt, max_tokens=16, temperature=0)


def test_complete(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    response = scale_llm.complete("Alice")
    expected = expected_scale(scale_client, "Alice")
    assert response.text == expected.text
    assert response.raw == expected.raw
    assert response.additional_kwargs["finish_reason"] == expected.finish_reason
    assert response.additional_kwargs["response_tokens"] == expected.response_tokens


def test_stream_complete_yields_token_deltas(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    responses = list(scale_llm.stream_complete("Alice"))
    deltas = [r.delta or "" for r in responses]
    assert len([d for d in deltas if d]) > 1
    assert [r.text for r in responses] == ["".join(deltas[: i + 1]) for i in range(len(deltas))]
    assert responses[-1].text == expected_scale(scale_client, "Alice").text
    assert responses[-1].additional_kwargs["finish_reason"] == "length"


async def test_acomplete_and_astream_complete(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    expected = expected_scale(scale_client, "The Queen").text
    assert (await scale_llm.acomplete("The Queen")).text == expected
    responses = [r async for r in await scale_llm.astream_complete("The Queen")]
    assert len([r for r in responses if r.delta]) > 1
    assert responses[-1].text == expected


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_chat_goes_through_messages_to_prompt(
    scale_llm: ScaleLLM, scale_client: Scale, mode: str
) -> None:
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="You are Alice."),
        ChatMessage(role=MessageRole.USER, content="Who are you?"),
    ]
    assert scale_llm.messages_to_prompt is not None
    expected = expected_scale(scale_client, scale_llm.messages_to_prompt(messages)).text
    if mode == "sync":
        reply = scale_llm.chat(messages)
        streamed = [r.delta for r in scale_llm.stream_chat(messages)]
    else:
        reply = await scale_llm.achat(messages)
        streamed = [r.delta async for r in await scale_llm.astream_chat(messages)]
    assert (reply.message.role, reply.message.content) == (MessageRole.ASSISTANT, expected)
    assert "".join(d or "" for d in streamed) == expected


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_simple_chat_engine_over_the_model(
    scale_llm: ScaleLLM, scale_client: Scale, sandbox: Sandbox, mode: str
) -> None:
    # ChatMemoryBuffer keeps the history in memory (the default Memory opens an SQLite engine to close)
    engine = SimpleChatEngine.from_defaults(llm=scale_llm, memory_cls=ChatMemoryBuffer)
    first = engine.chat("Hello Alice") if mode == "sync" else await engine.achat("Hello Alice")
    second = engine.chat("And the Queen?") if mode == "sync" else await engine.achat("And the Queen?")
    assert scale_llm.messages_to_prompt is not None
    history = [
        ChatMessage(role=MessageRole.USER, content="Hello Alice"),
        ChatMessage(role=MessageRole.ASSISTANT, content=first.response),
        ChatMessage(role=MessageRole.USER, content="And the Queen?"),
    ]
    assert first.response == expected_scale(scale_client, scale_llm.messages_to_prompt(history[:1])).text
    assert second.response == expected_scale(scale_client, scale_llm.messages_to_prompt(history)).text
    assert [m.content for m in engine.chat_history] == [m.content for m in history] + [second.response]


def test_metadata_comes_from_the_sandbox_or_llama_index(scale_llm: ScaleLLM, sandbox: Sandbox) -> None:
    contexts = {m.id: m.context for handler in registry().values() for m in handler.models}
    meta = scale_llm.metadata
    assert (meta.context_window, meta.num_output, meta.model_name) == (contexts[SCALE_MODEL], 16, SCALE_MODEL)
    adapter = GradientModelAdapterLLM(
        model_adapter_id=ADAPTER,
        access_token=CREDENTIAL,
        workspace_id=CREDENTIAL,
        host=sandbox.gradient_base_url,
    )
    assert (adapter.metadata.context_window, adapter.metadata.num_output) == (
        contexts[ADAPTER],
        DEFAULT_NUM_OUTPUTS,
    )
    with socket.socket() as unused:  # a port nothing listens on: no server to ask
        unused.bind(("127.0.0.1", 0))
        elsewhere = f"http://127.0.0.1:{unused.getsockname()[1]}"
    unknown = ScaleLLM(model=SCALE_MODEL, api_key=CREDENTIAL, base_url=elsewhere)
    assert unknown.metadata.context_window == DEFAULT_CONTEXT_WINDOW  # nothing invented
    given = ScaleLLM(
        model=SCALE_MODEL, api_key=CREDENTIAL, base_url=elsewhere, context_window=8192, num_output=99
    )
    assert (given.metadata.context_window, given.metadata.num_output) == (8192, 99)
    for llm in (adapter, unknown, given):
        llm.close()


def test_gradient_takes_the_former_classes_arguments(
    gradient_llm: GradientLLM, gradient_client: Gradient, sandbox: Sandbox
) -> None:
    expected = gradient_client.complete(GRADIENT_MODEL, "Alice", max_generated_token_count=12, temperature=0)
    assert gradient_llm.complete("Alice").text == expected.text
    assert [r.delta for r in gradient_llm.stream_complete("Alice")] == [expected.text]  # one chunk
    adapter = GradientModelAdapterLLM(
        model_adapter_id=ADAPTER,
        access_token=CREDENTIAL,
        workspace_id=CREDENTIAL,
        host=sandbox.gradient_base_url,
    )
    assert adapter.complete("Alice", max_generated_token_count=6, temperature=0).text == (
        gradient_client.complete(ADAPTER, "Alice", max_generated_token_count=6, temperature=0).text
    )
    adapter.close()
    with pytest.raises(
        ValidationError, match="give exactly one of model, base_model_slug and model_adapter_id"
    ):
        GradientLLM(base_model_slug=GRADIENT_MODEL, model_adapter_id=ADAPTER)
    with pytest.raises(ValidationError, match="give exactly one of"):
        GradientLLM()


def test_gradient_reads_the_environment(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> None:
    monkeypatch.setenv("GRADIENT_ACCESS_TOKEN", CREDENTIAL)
    monkeypatch.setenv("GRADIENT_WORKSPACE_ID", CREDENTIAL)
    monkeypatch.setenv("GRADIENT_API_URL", sandbox.gradient_base_url)
    llm = GradientLLM(model=GRADIENT_MODEL, max_tokens=4)
    assert llm.complete("Alice").text
    llm.close()


async def test_errors_surface_as_our_types(
    scale_llm: ScaleLLM, gradient_llm: GradientLLM, sandbox: Sandbox
) -> None:
    with pytest.raises(errors.InternalServerError):
        await scale_llm.acomplete("__fail__ Alice", max_tokens=4)
    with pytest.raises(errors.ContentFlaggedError):
        gradient_llm.complete("contraband")
    with pytest.raises(ValueError, match="max_generated_token_count"):  # checked as the client checks it
        await gradient_llm.acomplete("Alice", max_generated_token_count=100_000)


def test_the_adapter_needs_its_extra_and_the_clients_need_no_framework() -> None:
    script = """
import sys
import wrapper.gradient, wrapper.scale
assert not [m for m in sys.modules if m.startswith(("langchain", "llama_index"))], "a framework was imported"
sys.modules["llama_index"] = None  # as if the extra were not installed
try:
    import wrapper.llama_index
except ImportError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert install_command("llama-index").search(out), out


async def test_metadata_asks_the_given_clients_server_and_never_the_vendor(
    clean_env: None, sandbox: Sandbox
) -> None:
    async with AsyncScale(api_key=CREDENTIAL, base_url=sandbox.scale_base_url) as client:
        llm = ScaleLLM(model=SCALE_MODEL, async_client=client)  # no credentials for a sync client
        assert (
            llm.metadata.context_window == {m.id: m.context for m in registry()["scale"].models}[SCALE_MODEL]
        )
    with respx.mock:  # no route: a request to the vendor would fail the test
        vendor = ScaleLLM(model=SCALE_MODEL, api_key=CREDENTIAL)
        assert vendor.metadata.context_window == DEFAULT_CONTEXT_WINDOW
        vendor.close()


def test_credentials_stay_out_of_repr_and_serialisation() -> None:
    secret = "sk-secret-1234567890"
    scale = ScaleLLM(model=SCALE_MODEL, api_key=secret)
    gradient = GradientLLM(model=GRADIENT_MODEL, access_token=secret, workspace_id="ws")
    for llm in (scale, gradient):
        assert secret not in repr(llm)
        assert secret not in llm.to_json()


async def test_callbacks_fire_on_cache_hits_as_on_misses(sandbox: Sandbox, tmp_path: Path) -> None:
    from llama_index.core.callbacks import CallbackManager, LlamaDebugHandler

    debug = LlamaDebugHandler()
    llm = ScaleLLM(
        model=SCALE_MODEL,
        api_key=CREDENTIAL,
        base_url=sandbox.scale_base_url,
        max_tokens=8,
        response_cache=str(tmp_path / "cache.db"),
        callback_manager=CallbackManager([debug]),
    )
    before = sandbox.stats().requests
    try:
        first = llm.complete("Alice was")
        again = llm.complete("Alice was")
        async_again = await llm.acomplete("Alice was")
    finally:
        llm.close()
        await llm.aclose()
    assert sandbox.stats().requests - before == 1
    assert first.text == again.text == async_again.text
    assert len(debug.get_llm_inputs_outputs()) == 3  # a start and an end event for each call
