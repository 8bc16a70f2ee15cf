"""No empty pieces: ``text_stream`` and LangChain's ``stream``/``astream`` leave out chunks without text
(Scale's last chunk, which carries the finish reason and counts, usually has none), while those still
reach ``get_final_completion`` and LangChain's ``generate``. On a loopback server, sync and async."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers import LocalServer, collect, final, sse_data, sse_reply
from langchain_core.callbacks import BaseCallbackHandler

from wrapper.langchain import ScaleLLM

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

EVENTS = [
    sse_data("Hel"),
    sse_data(""),
    sse_data("lo"),
    sse_data("", finish_reason="stop", prompt_tokens=3, response_tokens=2),
]


class Tokens(BaseCallbackHandler):
    """The tokens LangChain hands its callbacks."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


@pytest.fixture
async def llm(server: LocalServer, clean_env: None) -> AsyncIterator[ScaleLLM]:
    server.script(sse_reply(EVENTS))
    model = ScaleLLM(model="m", api_key="k", base_url=server.url, max_retries=0)
    yield model
    model.close()
    await model.aclose()


async def test_text_stream_has_no_empty_pieces(make_client: Any, lane: str, server: LocalServer) -> None:
    server.script(sse_reply(EVENTS))
    client = make_client("scale", lane, base_url=server.url)
    assert await collect(client.stream("m", "p").text_stream) == ["Hel", "lo"]
    completion = await final(client.stream("m", "p"))
    assert (completion.text, completion.finish_reason, completion.response_tokens) == ("Hello", "stop", 2)


async def test_langchain_stream_has_no_empty_pieces(llm: ScaleLLM, mode: str) -> None:
    callbacks = Tokens()
    config: Any = {"callbacks": [callbacks]}
    if mode == "sync":
        pieces = list(llm.stream("p", config=config))
    else:
        pieces = [piece async for piece in llm.astream("p", config=config)]
    assert pieces == callbacks.tokens == ["Hel", "lo"]


async def test_langchain_streaming_generate_keeps_the_finish_reason(llm: ScaleLLM, mode: str) -> None:
    llm.streaming = True
    callbacks = Tokens()
    if mode == "sync":
        result = llm.generate(["p"], callbacks=[callbacks])
    else:
        result = await llm.agenerate(["p"], callbacks=[callbacks])
    generation = result.generations[0][0]
    assert generation.text == "Hello"
    assert callbacks.tokens == ["Hel", "lo"]
    info = generation.generation_info or {}
    assert [info.get(key) for key in ("finish_reason", "prompt_tokens", "response_tokens")] == ["stop", 3, 2]
