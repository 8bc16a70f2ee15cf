"""The sandbox serves each API through its handler, found by the API's name: its app knows no API.

One test checks the registry of the real APIs; the other plugs in a third API (a descriptor, a spec and
a handler, nothing else) and finds every generic behaviour applied to it: its route, its credential,
its error shapes, validation against its spec, faults selected by its name, rate limits, streams.
"""

from __future__ import annotations

import json
import shutil
import sys
import types
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from wrapper import apis as _api
from wrapper.sandbox import Sandbox, _validate
from wrapper.sandbox._catalog import Model
from wrapper.sandbox._handler import Call, Handler
from wrapper.sandbox._registry import registry
from wrapper.sandbox._validate import Operation

NO_CREDENTIAL = {"gradient": "", "scale": ""}


def test_each_api_has_its_handler_and_its_route_answers() -> None:
    handlers = registry()
    assert list(handlers) == list(_api.NAMES)
    with Sandbox(seed=0) as sb:
        assert (sb.scale_base_url, sb.gradient_base_url) == (sb.base_url("scale"), sb.base_url("gradient"))
        models = httpx.get(f"{sb.url}/_sandbox/models", timeout=10).json()
        assert list(models) == list(_api.NAMES)
        for name, handler in handlers.items():
            assert handler.name == name
            assert handler.api is _api.get(name)
            model = handler.models[0].id
            path = handler.operation.path.replace(f"{{{handler.model_param}}}", model)
            # no credential: the app's 401, in the API's own shape (the spec's error body, not Starlette's)
            refused = httpx.post(sb.base_url(name) + path, json={}, timeout=10)
            assert refused.status_code == 401, (name, refused.text)
            assert refused.json() == json.loads(
                bytes(handler.status_error(401, _no_credential(handler)).body)
            )
            assert models[name][0]["id"] == model
        with pytest.raises(ValueError, match="api must be one of"):
            sb.base_url("nope")


def _no_credential(handler: Handler) -> str:
    return f"Not authenticated: send {handler.credential_how}"


# -- a third API ----------------------------------------------------------------------------------------

ECHO_SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Echo", "version": "1"},
    "paths": {
        "/v1/echo/{model}": {
            "post": {
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["text"],
                                "additionalProperties": False,
                                "properties": {
                                    "text": {"type": "string"},
                                    "limit": {"type": "integer", "minimum": 1},
                                    "stream": {"type": "boolean"},
                                },
                            }
                        }
                    }
                }
            }
        }
    },
}


class EchoHandler(Handler):
    """An API that answers its text back, word by word when streamed."""

    name = "echo"
    title = "Echo"
    operation = Operation("echo", "/v1/echo/{model}", "post")
    models = (Model("echo-1", 2, 64, description="echoes"),)
    models_label = "models"
    headers_help = "x-echo-key: <any>"
    default_max_tokens = 8
    prompt_field = "text"
    max_tokens_field = "limit"
    credential_metavar = "KEY"
    credential_help = "x-echo-key"
    credential_name = "the echo key"
    credential_how = "the x-echo-key header"

    def credential(self, request: Request) -> str:
        return request.headers.get("x-echo-key", "")

    def wants_stream(self, raw: bytes) -> bool:
        try:
            return json.loads(raw).get("stream") is True
        except (ValueError, AttributeError):
            return False

    def bad_fault_header(self, message: str, value: str) -> Response:
        return JSONResponse({"problem": message, "value": value}, status_code=400)

    def status_error(self, status: int, message: str) -> Response:
        return JSONResponse({"problem": message}, status_code=status)

    def invalid(self, errors: list[dict[str, Any]]) -> Response:
        return JSONResponse({"problems": errors}, status_code=400)

    def unknown_model(self, model_id: str) -> Response:
        return JSONResponse({"problem": f"no model {model_id}"}, status_code=404)

    def complete(self, call: Call) -> Response | AsyncGenerator[str, None]:
        words = call.body["text"].split()
        call.settle(2 * len(words))
        if call.stream:
            return _words(words)
        return JSONResponse({"echo": " ".join(words), "model": call.model.id})

    def triggers_help(self) -> str:
        return "Error triggers: none"


async def _words(words: list[str]) -> AsyncGenerator[str, None]:
    for word in words:
        yield f"data: {json.dumps({'word': word})}\n\n"


@pytest.fixture
def echo_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A third API, ``echo``: its descriptor, its spec and its handler are all it has."""
    # what the sandbox reads of a descriptor: its name, its credentials and where the sandbox serves it
    credential = _api.Credential("echo_key", "ECHO_KEY", required=True)
    descriptor = types.SimpleNamespace(name="echo", credentials=(credential,), sandbox_path="/echo")
    monkeypatch.setitem(sys.modules, "wrapper.echo", types.SimpleNamespace(API=descriptor))
    monkeypatch.setitem(sys.modules, "wrapper.sandbox._echo", types.SimpleNamespace(HANDLER=EchoHandler()))
    monkeypatch.setattr(_api, "NAMES", (*_api.NAMES, "echo"))
    for name in ("gradient", "scale"):
        (tmp_path / name).mkdir()
        shutil.copy(_validate.SPECS / name / "spec.json", tmp_path / name / "spec.json")
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "spec.json").write_text(json.dumps(ECHO_SPEC), encoding="utf-8")
    monkeypatch.setattr(_validate, "SPECS", tmp_path)
    registry.cache_clear()
    yield
    registry.cache_clear()  # the real APIs' registry, once the patches are undone


@pytest.fixture
def echo(echo_api: None) -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


def _post(url: str, body: dict[str, Any], key: str = "k", **headers: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={"x-echo-key": key, **headers} if key else headers, timeout=10)


def test_a_third_api_is_served_from_its_descriptor_spec_and_handler_alone(echo: Sandbox) -> None:
    url = echo.base_url("echo") + "/v1/echo/echo-1"
    assert echo.base_url("echo") == echo.url + "/echo"

    answered = _post(url, {"text": "down the rabbit hole"})
    assert answered.status_code == 200
    assert answered.json() == {"echo": "down the rabbit hole", "model": "echo-1"}
    assert answered.headers["x-request-id"].startswith("sandbox-")

    assert _post(url, {"text": "hi"}, key="").json() == {
        "problem": "Not authenticated: send the x-echo-key header"
    }
    refused = _post(url, {"text": "hi"}, key="invalid")
    assert (refused.status_code, refused.json()) == (
        401,
        {"problem": "Not authenticated: the echo key sent was refused"},
    )

    invalid = _post(url, {"text": "hi", "limit": 0, "extra": 1})
    assert invalid.status_code == 400
    assert sorted((p["loc"], p["type"]) for p in invalid.json()["problems"]) == [
        (["extra"], "extra_forbidden"),
        (["limit"], "greater_than_equal"),
    ]
    unknown = _post(echo.base_url("echo") + "/v1/echo/echo-2", {"text": "hi"})
    assert (unknown.status_code, unknown.json()) == (404, {"problem": "no model echo-2"})

    echo.inject(status=503, retry_after=2, api="echo")
    scale = httpx.post(
        echo.scale_base_url + "/v4/models/llama-3-8b-instruct/completions",
        json={"prompt": "Alice", "max_tokens": 2},
        headers={"x-api-key": "k"},
        timeout=10,
    )
    assert scale.status_code == 200  # the rule selects the echo API only
    faulted = _post(url, {"text": "hi"})
    assert (faulted.status_code, faulted.headers["retry-after"]) == (503, "2")
    assert faulted.json() == {"problem": "Sandbox fault: status 503"}
    bad_header = _post(url, {"text": "hi"}, **{"x-sandbox-fault": "status=abc"})
    assert bad_header.status_code == 400
    assert bad_header.json()["value"] == "status=abc"

    with httpx.stream("POST", url, json={"text": "a b c", "stream": True}, headers={"x-echo-key": "k"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    assert events == [{"word": "a"}, {"word": "b"}, {"word": "c"}]
    echo.inject(cut=1, api="echo")  # the app's stream faults apply to the handler's events
    got: list[str] = []
    body = {"text": "a b c", "stream": True}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", url, json=body, headers={"x-echo-key": "k"}) as r,
    ):
        got.extend(line for line in r.iter_lines() if line.startswith("data:"))
    assert got == ['data: {"word": "a"}']

    models = httpx.get(f"{echo.url}/_sandbox/models", timeout=10).json()
    assert models["echo"] == [{"id": "echo-1", "context": 64}]
    assert echo.stats().requests == 10  # every request to a vendor route, the echo API's too


def test_a_third_api_has_rate_limits_per_credential_and_faults_by_name(echo_api: None) -> None:
    with Sandbox(rpm=6) as sb:  # a tenth of a request a second: the second one is refused
        url = sb.base_url("echo") + "/v1/echo/echo-1"
        assert _post(url, {"text": "hi"}, key="a").status_code == 200
        limited = _post(url, {"text": "hi"}, key="a")
        assert limited.status_code == 429
        assert limited.json()["problem"].startswith("Rate limit reached: 6 requests per minute")
        assert int(limited.headers["retry-after-ms"]) > 0
        assert _post(url, {"text": "hi"}, key="b").status_code == 200  # another credential's budget
        assert sb.stats().rate_limited == 1
        with pytest.raises(ValueError, match="api must be 'gradient' or 'scale' or 'echo', not 'nope'"):
            sb.inject(status=500, api="nope")
