"""wrapper.langchain: ScaleLLM and GradientLLM through LangChain's own API, against the sandbox."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from helpers import install_command
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda
from pydantic import ValidationError

from wrapper import errors
from wrapper.gradient import Gradient
from wrapper.langchain import GradientLLM, ScaleLLM
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

SCALE_MODEL = "llama-3-8b-instruct"
GRADIENT_MODEL = "nous-hermes2"
CREDENTIAL = "langchain-tests"


class Recorder(BaseCallbackHandler):
    """Records what LangChain tells callbacks: each new token, each run's batch size, errors."""

    def __init__(self) -> None:
        self.tokens: list[str] = []
        self.batch_sizes: list[int] = []
        self.errors: list[BaseException] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.batch_sizes.append(kwargs["batch_size"])

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.errors.append(error)


@pytest.fixture
async def scale_llm(sandbox: Sandbox) -> AsyncIterator[ScaleLLM]:
    llm = ScaleLLM(
        model=SCALE_MODEL,
        api_key=CREDENTIAL,
        base_url=sandbox.scale_base_url,
        max_retries=0,
        max_tokens=16,
        temperature=0,
    )
    yield llm
    llm.close()
    await llm.aclose()


@pytest.fixture
async def gradient_llm(sandbox: Sandbox) -> AsyncIterator[GradientLLM]:
    llm = GradientLLM(  # langchain_community's constructor arguments
        model=GRADIENT_MODEL,
        gradient_access_token=CREDENTIAL,
        gradient_workspace_id=CREDENTIAL,
        gradient_api_url=sandbox.gradient_base_url,
        model_kwargs={
            "max_generated_token_count": 12,
            "temperature": 0,
            "top_k": 5,
            "top_p": 0.9,
            "stop": [],
        },
    )
    yield llm
    llm.close()
    await llm.aclose()


def expected_scale(scale_client: Scale, prompt: str, **params: Any) -> str:
    """What the client itself answers for the ``scale_llm`` fixture's settings (``params`` override them)."""
    return scale_client.complete(SCALE_MODEL, prompt, **{"max_tokens": 16, "temperature": 0, **params}).text


def chain(llm: ScaleLLM) -> Any:
    return PromptTemplate.from_template("Tell me about {topic}") | llm | StrOutputParser()


async def run(runnable: Any, mode: str, method: str, *args: Any, **kwargs: Any) -> Any:
    """``runnable.invoke(...)`` (or ``batch``) in sync mode, ``await runnable.ainvoke(...)`` in async mode."""
    if mode == "sync":
        return getattr(runnable, method)(*args, **kwargs)
    return await getattr(runnable, f"a{method}")(*args, **kwargs)


def test_a_chain_invokes_the_sync_client(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    assert chain(scale_llm).invoke({"topic": "Alice"}) == expected_scale(scale_client, "Tell me about Alice")


async def test_a_chain_invokes_the_async_client(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    answer = await chain(scale_llm).ainvoke({"topic": "the Queen"})
    assert answer == expected_scale(scale_client, "Tell me about the Queen")


def test_stream_delivers_each_token_to_the_callbacks(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    recorder = Recorder()
    pieces = list(chain(scale_llm).stream({"topic": "Alice"}, config={"callbacks": [recorder]}))
    assert len([p for p in pieces if p]) > 1  # token deltas, not one block
    assert recorder.tokens == pieces
    assert "".join(pieces) == expected_scale(scale_client, "Tell me about Alice")


async def test_astream_delivers_each_token_to_the_callbacks(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    recorder = Recorder()
    pieces = [p async for p in scale_llm.astream("Alice", config={"callbacks": [recorder]})]
    assert len([p for p in pieces if p]) > 1
    assert recorder.tokens == pieces
    assert "".join(pieces) == expected_scale(scale_client, "Alice")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_streaming_invoke_reports_tokens(sandbox: Sandbox, scale_client: Scale, mode: str) -> None:
    llm = ScaleLLM(
        model=SCALE_MODEL, api_key=CREDENTIAL, base_url=sandbox.scale_base_url, streaming=True, max_tokens=16
    )
    recorder = Recorder()
    config: Any = {"callbacks": [recorder]}
    text = await run(llm, mode, "invoke", "Alice", temperature=0, config=config)
    result = await run(llm, mode, "generate", ["Alice"], temperature=0)
    await llm.aclose()
    llm.close()
    assert len(recorder.tokens) > 1
    assert text == "".join(recorder.tokens) == expected_scale(scale_client, "Alice")
    expected = scale_client.complete(SCALE_MODEL, "Alice", temperature=0, max_tokens=16)
    info = result.generations[0][0].generation_info
    assert info == {
        "finish_reason": expected.finish_reason,
        "prompt_tokens": expected.prompt_tokens,
        "response_tokens": expected.response_tokens,
        "request_id": info["request_id"],
    }
    assert info["request_id"].count("sandbox-") == 1  # the stream's own, not one per chunk joined


@pytest.mark.serial  # an in-flight peak within a 0.2 s hold
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_batch_is_one_complete_many_with_max_concurrency_in_flight(
    scale_llm: ScaleLLM, scale_client: Scale, sandbox: Sandbox, mode: str
) -> None:
    prompts = [f"Alice number {i}" for i in range(50)]
    recorder = Recorder()
    config: Any = {"max_concurrency": 10, "callbacks": [recorder]}
    sandbox.inject(delay=0.2, rate=1.0)  # every request held, so that they overlap
    answers = await run(chain(scale_llm), mode, "batch", [{"topic": p} for p in prompts], config=config)
    assert sandbox.stats().max_in_flight == 10
    assert recorder.batch_sizes == [50] * 50  # one generate call for all, not chunks of max_concurrency
    sandbox.clear_faults()
    assert answers[:3] == [expected_scale(scale_client, f"Tell me about {p}") for p in prompts[:3]]


@pytest.mark.serial  # a rate: the sandbox's per-second budget
def test_a_batch_honours_the_models_rate_limit() -> None:
    with Sandbox(rpm=1200) as limited:  # 429 past 1200 requests a minute: 20 at once at most
        llm = ScaleLLM(
            model=SCALE_MODEL, api_key=CREDENTIAL, base_url=limited.scale_base_url, requests_per_minute=1100
        )
        answers = llm.batch([f"Alice {i}" for i in range(25)], config={"max_concurrency": 25}, max_tokens=4)
        llm.close()
        assert len(answers) == 25
        assert limited.stats().rate_limited == 0  # unpaced, 25 at once would have got 429s


def test_generation_info_and_llm_output(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    result = scale_llm.generate(["Alice", "The Queen"])
    direct = [
        scale_client.complete(SCALE_MODEL, p, max_tokens=16, temperature=0) for p in ("Alice", "The Queen")
    ]
    infos = [generations[0].generation_info for generations in result.generations]
    assert [(i["finish_reason"], i["prompt_tokens"], i["response_tokens"]) for i in infos] == [
        (c.finish_reason, c.prompt_tokens, c.response_tokens) for c in direct
    ]
    assert all(i["request_id"].startswith("sandbox-") for i in infos)
    prompt_tokens = sum(c.prompt_tokens or 0 for c in direct)
    completion_tokens = sum(c.response_tokens or 0 for c in direct)
    assert result.llm_output == {
        "model_name": SCALE_MODEL,
        "token_usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def test_stop_is_sent_as_the_apis_stop_sequences(scale_llm: ScaleLLM, scale_client: Scale) -> None:
    unstopped = scale_llm.invoke("Alice", max_tokens=40)
    assert "." in unstopped  # so that a stop sequence "." changes the answer
    stopped = scale_llm.invoke("Alice", max_tokens=40, stop=["."])
    assert stopped == expected_scale(scale_client, "Alice", max_tokens=40, stop_sequences=["."]) != unstopped
    assert scale_llm.bind(stop=["."]).invoke("Alice", max_tokens=40) == stopped


def test_gradient_refuses_stop_before_sending(gradient_llm: GradientLLM, sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match=r"^stop: Gradient's API has no stop sequences"):
        gradient_llm.invoke("Alice", stop=["."])
    assert sandbox.stats().requests == 0


def test_keyword_arguments_are_checked_as_the_client_checks_them(
    scale_llm: ScaleLLM, sandbox: Sandbox
) -> None:
    with pytest.raises(ValueError, match="temperature") as caught:
        scale_llm.invoke("Alice", temperature=5)
    with pytest.raises(ValueError, match="temperature") as direct:
        Scale(api_key=CREDENTIAL, base_url=sandbox.scale_base_url).complete(
            SCALE_MODEL, "Alice", temperature=5
        )
    assert str(caught.value) == str(direct.value)
    assert sandbox.stats().requests == 0


def test_constructor_keywords_go_to_the_client(sandbox: Sandbox, scale_client: Scale) -> None:
    llm = ScaleLLM(
        model=SCALE_MODEL, api_key=CREDENTIAL, base_url=sandbox.scale_base_url, top_k=1, max_tokens=6
    )
    assert (llm.model_kwargs, llm.max_tokens) == ({"top_k": 1}, 6)
    assert llm.invoke("Alice") == scale_client.complete(SCALE_MODEL, "Alice", top_k=1, max_tokens=6).text
    llm.close()
    with pytest.raises(ValidationError, match="no_such_argument"):
        ScaleLLM(model=SCALE_MODEL, api_key=CREDENTIAL, no_such_argument=1)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_errors_surface_as_our_types(scale_llm: ScaleLLM, sandbox: Sandbox, mode: str) -> None:
    recorder = Recorder()
    sandbox.inject(status=429, retry_after=0, api="scale")
    with pytest.raises(errors.RateLimitError):
        await run(scale_llm, mode, "invoke", "Alice", config={"callbacks": [recorder]})
    assert [type(e) for e in recorder.errors] == [errors.RateLimitError]
    with pytest.raises(errors.InternalServerError):  # a batch's failed prompt raises its own error
        await run(scale_llm, mode, "batch", ["Alice", "__fail__ Alice"], config={"max_concurrency": 2})


def test_with_retry_and_with_fallbacks_tell_errors_apart(scale_llm: ScaleLLM, sandbox: Sandbox) -> None:
    sandbox.inject(status=429, retry_after=0, api="scale")
    retrying = scale_llm.with_retry(
        retry_if_exception_type=(errors.RateLimitError,), stop_after_attempt=2, wait_exponential_jitter=False
    )
    assert retrying.invoke("Alice")
    assert sandbox.stats().requests == 2

    fallback = RunnableLambda(lambda _: "fallback")
    too_long = scale_llm.bind(max_tokens=5000)  # over the model's context: 422
    on_bad_request = too_long.with_fallbacks(
        [fallback], exceptions_to_handle=(errors.UnprocessableEntityError,)
    )
    assert on_bad_request.invoke("Alice") == "fallback"
    sandbox.inject(status=429, retry_after=0, api="scale")
    on_bad_request = scale_llm.with_fallbacks(
        [fallback], exceptions_to_handle=(errors.UnprocessableEntityError,)
    )
    with pytest.raises(errors.RateLimitError):  # not a bad request: no fallback
        on_bad_request.invoke("Alice")


def test_gradient_llm_takes_langchain_communitys_arguments(
    gradient_llm: GradientLLM, gradient_client: Gradient
) -> None:
    params: dict[str, Any] = {"max_generated_token_count": 12, "temperature": 0, "top_k": 5, "top_p": 0.9}
    expected = gradient_client.complete(GRADIENT_MODEL, "Alice", **params)
    result = gradient_llm.generate(["Alice"])
    assert result.generations[0][0].text == expected.text
    assert result.generations[0][0].generation_info == {
        "finish_reason": expected.finish_reason,
        "request_id": result.generations[0][0].generation_info["request_id"],  # type: ignore[index]
    }
    assert result.llm_output == {"model_name": GRADIENT_MODEL}  # Gradient reports no token counts
    assert list(gradient_llm.stream("Alice")) == [expected.text]  # Gradient does not stream: one chunk


async def test_gradient_llm_async_and_batch(gradient_llm: GradientLLM, gradient_client: Gradient) -> None:
    prompts = ["Alice", "The Queen", "The Rabbit"]
    expected = [
        gradient_client.complete(GRADIENT_MODEL, p, max_generated_token_count=12, temperature=0)
        for p in prompts
    ]
    params: dict[str, Any] = {"max_generated_token_count": 12, "temperature": 0}
    assert await gradient_llm.abatch(prompts, config={"max_concurrency": 2}, **params) == [
        e.text for e in expected
    ]
    assert gradient_llm.batch(prompts, **params) == [e.text for e in expected]
    unknown = GradientLLM(
        model_id="no-such-model",
        gradient_access_token=CREDENTIAL,
        gradient_workspace_id=CREDENTIAL,
        gradient_api_url=gradient_client.base_url,
    )
    with pytest.raises(errors.UnknownBaseModelError):
        await unknown.ainvoke("Alice")
    await unknown.aclose()


def test_gradient_llm_reads_the_environment(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> None:
    monkeypatch.setenv("GRADIENT_ACCESS_TOKEN", CREDENTIAL)
    monkeypatch.setenv("GRADIENT_WORKSPACE_ID", CREDENTIAL)
    monkeypatch.setenv("GRADIENT_API_URL", sandbox.gradient_base_url)
    llm = GradientLLM(model_id=GRADIENT_MODEL)
    assert llm.invoke("Alice", max_generated_token_count=4)
    llm.close()
    with pytest.warns(DeprecationWarning, match="aiosession"):
        GradientLLM(model=GRADIENT_MODEL, aiosession=object())


def test_the_adapter_needs_its_extra_and_the_clients_need_no_framework() -> None:
    script = """
import sys
import wrapper.gradient, wrapper.scale
assert not [m for m in sys.modules if m.startswith(("langchain", "llama_index"))], "a framework was imported"
sys.modules["langchain_core"] = None  # as if the extra were not installed
try:
    import wrapper.langchain
except ImportError as exc:
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert install_command("langchain").search(out), out


@pytest.mark.serial  # an in-flight peak within a 0.2 s hold
def test_a_streaming_model_still_batches(sandbox: Sandbox) -> None:
    llm = ScaleLLM(model=SCALE_MODEL, api_key=CREDENTIAL, base_url=sandbox.scale_base_url, streaming=True)
    recorder = Recorder()
    sandbox.inject(delay=0.2, rate=1.0)
    answers = llm.batch(
        ["Alice", "The Queen", "The Dodo"], config={"max_concurrency": 3, "callbacks": [recorder]}
    )
    llm.close()
    assert len(answers) == 3
    assert sandbox.stats().max_in_flight == 3
    assert recorder.tokens == []


def test_credentials_stay_out_of_repr_and_serialisation() -> None:
    secret = "sk-secret-1234567890"
    scale = ScaleLLM(model=SCALE_MODEL, api_key=secret)
    gradient = GradientLLM(model=GRADIENT_MODEL, gradient_access_token=secret, gradient_workspace_id="ws")
    for llm in (scale, gradient):
        assert secret not in repr(llm)
        assert secret not in str(llm.asdict())
        assert secret not in llm.model_dump_json()


def test_the_secret_fields_name_the_environment_variables_the_clients_read(sandbox: Sandbox) -> None:
    """LangChain's ``lc_secrets`` come from each API's descriptor, not from a second list of names."""
    from wrapper import gradient, scale

    scale_llm = ScaleLLM(model="m", api_key="k", base_url=sandbox.scale_base_url)
    gradient_llm = GradientLLM(
        model_id="m",
        gradient_access_token="t",
        gradient_workspace_id="w",
        gradient_api_url=sandbox.gradient_base_url,
    )
    assert scale_llm.lc_secrets == {"api_key": scale.API.credentials[0].env}
    assert gradient_llm.lc_secrets == {"gradient_access_token": gradient.API.credentials[0].env}
    assert {scale.API.credentials[0].keyword, gradient.API.credentials[0].keyword} == {
        "api_key",
        "access_token",
    }


async def test_callbacks_fire_on_cache_hits_as_on_misses(sandbox: Sandbox, tmp_path: Path) -> None:
    class Ends(BaseCallbackHandler):
        def __init__(self) -> None:
            self.texts: list[str] = []

        def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            self.texts.append(response.generations[0][0].text)

    llm = ScaleLLM(
        model=SCALE_MODEL,
        api_key=CREDENTIAL,
        base_url=sandbox.scale_base_url,
        max_tokens=8,
        response_cache=str(tmp_path / "cache.db"),
    )
    ends = Ends()
    before = sandbox.stats().requests
    try:
        first = llm.invoke("Alice was", config={"callbacks": [ends]})
        again = llm.invoke("Alice was", config={"callbacks": [ends]})
        async_again = await llm.ainvoke("Alice was", config={"callbacks": [ends]})
    finally:
        llm.close()
        await llm.aclose()
    assert sandbox.stats().requests - before == 1
    assert first == again == async_again
    assert ends.texts == [first] * 3
