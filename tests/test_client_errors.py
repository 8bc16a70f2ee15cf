"""Every error either spec describes, and the ones it does not, map to their class in ``wrapper.errors``."""

from __future__ import annotations

import inspect
import pickle
import re
from types import ModuleType
from typing import Any

import httpx
import pytest
from helpers import (
    NO_SUCH_NAME,
    LocalServer,
    call,
    error_class_name,
    error_variants,
    json_reply,
    sample,
    scale_body,
    spec,
)
from overrides import APIS

from wrapper import errors
from wrapper._generated import exceptions as tree
from wrapper.errors import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    GradientError,
    RagError,
    UnknownModelError,
    UnprocessableEntityError,
)

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

GRADIENT = spec("gradient")
VALIDATION_PAYLOAD = {
    "validationError": {"issues": [{"path": ["query"]}]},
    "formattedValidationError": "query: bad",
}
GRADIENT_ERRORS = [
    (tag, {**sample(GRADIENT, schema), "type": tag}, getattr(errors, error_class_name(tag)))
    for tag, (_, schema) in error_variants().items()
]
STATUS_CLASSES = [
    (400, errors.BadRequestError),
    (401, errors.AuthenticationError),
    (403, errors.PermissionDeniedError),
    (404, errors.NotFoundError),
    (409, errors.ConflictError),
    (418, APIStatusError),
    (422, errors.UnprocessableEntityError),
    (429, errors.RateLimitError),
    (500, errors.InternalServerError),
    (503, errors.InternalServerError),
]


def answer(
    status: int, body: Any = None, *, content: bytes | None = None, headers: dict[str, str] | None = None
) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        if content is not None:
            return httpx.Response(status, content=content, headers=headers)
        return httpx.Response(status, json=body, headers=headers)

    return handler


async def failure(client: Any, *args: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        await call(client.complete(*args or ("m", "p")))
    return caught.value


def test_every_class_has_a_one_line_docstring() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert inspect.isclass(cls), name
        assert issubclass(cls, APIError | errors.InsecureConnectionWarning), name
        assert cls.__doc__, name
        assert "\n" not in cls.__doc__.strip(), name


@pytest.mark.parametrize("tag", list(error_variants()))
def test_each_error_type_has_its_class_under_the_parent_the_override_table_names(tag: str) -> None:
    choices = APIS["gradient"]
    parent = choices.error_parents.get(tag) or next(
        (p for pattern, p in choices.error_parent_patterns if re.search(pattern, tag)), "GradientError"
    )
    cls = getattr(errors, error_class_name(tag))
    assert cls.__bases__ == (getattr(tree, parent),)
    assert cls.__name__ in errors.__all__


@pytest.mark.parametrize(("type_", "extra", "cls"), GRADIENT_ERRORS, ids=[e[0] for e in GRADIENT_ERRORS])
async def test_gradient_typed_bodies(
    make_client: Any, mode: str, type_: str, extra: dict[str, Any], cls: Any
) -> None:
    body = {**extra, "message": f"it went wrong: {type_}"}
    client = make_client(
        "gradient", mode, answer(400, body, headers={"x-request-id": "req-7"}), max_retries=0
    )
    error = await failure(client)
    assert isinstance(error, cls)
    assert isinstance(error, errors.BadRequestError)
    assert type(error).__name__ == cls.__name__
    assert (error.type, error.status_code, error.body, error.request_id) == (type_, 400, body, "req-7")
    assert f"it went wrong: {type_}" in str(error)
    assert error.raw.to_dict() == body


TYPED_STATUSES = [(400, errors.BadRequestError), (404, errors.NotFoundError),
                  (418, APIStatusError), (422, errors.UnprocessableEntityError)]  # fmt: skip


@pytest.mark.parametrize(("status", "status_class"), TYPED_STATUSES, ids=[str(s) for s, _ in TYPED_STATUSES])
async def test_a_typed_error_is_also_the_status_class_of_its_status(
    make_client: Any, server: LocalServer, lane: str, status: int, status_class: type[APIStatusError]
) -> None:
    """The spec gives every typed body any 4XX status: whichever comes, ``except`` by the status class
    catches the typed error, and so does ``except`` by its own class."""
    client = make_client("gradient", lane, base_url=server.url + "/api", max_retries=0)
    for type_, extra, cls in GRADIENT_ERRORS:
        server.script(json_reply(status, {**extra, "message": "no"}))
        with pytest.raises(status_class) as caught:  # as ``except status_class:`` matches
            await call(client.complete("m", "p"))
        error = caught.value
        assert isinstance(error, cls), type_
        assert (type(error).__name__, type(error).__module__) == (cls.__name__, "wrapper.errors")
        assert (error.status_code, error.type) == (status, type_)  # type: ignore[attr-defined]
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), str(copy)) == (type(error), str(error))


async def test_gradient_error_data(make_client: Any) -> None:
    def error_for(body: dict[str, Any]) -> Any:
        client = make_client("gradient", "sync", answer(422, body), max_retries=0)
        with pytest.raises(GradientError) as caught:
            client.complete("m", "q")
        return caught.value

    samples = [{"sample": "bad words"}, {"sample": "worse"}]
    flagged = error_for({"type": "flaggedContent", "message": "m", "payload": {"flaggedContent": samples}})
    assert flagged.samples == ["bad words", "worse"]
    samples = [{"sample": None}, {"sample": "worse"}]  # a sample that is no text: left out, not a crash
    flagged = error_for({"type": "flaggedContent", "message": "m", "payload": {"flaggedContent": samples}})
    assert (type(flagged).__name__, flagged.samples) == ("ContentFlaggedError", ["worse"])
    parsing = error_for({"type": "bodyParsingError", "message": "m", "payload": VALIDATION_PAYLOAD})
    assert parsing.validation_error == VALIDATION_PAYLOAD["validationError"]
    assert parsing.formatted_validation_error == "query: bad"
    assert (
        error_for({"type": "queryOrPathParsingError", "message": "m", "payload": {}}).validation_error is None
    )
    assert isinstance(error_for({"type": "unknownRagCollection", "message": "m"}), RagError)
    assert isinstance(error_for({"type": "unknownModelAdapter", "message": "m"}), UnknownModelError)


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_gradient_typed_body_of_an_unknown_type_is_a_plain_gradient_error(
    make_client: Any, mode: str, status: int
) -> None:
    """A service newer than the spec: its error still has ``.type`` and ``.message``, ``.raw`` is None."""
    body = {"type": NO_SUCH_NAME, "message": "something new went wrong", "payload": {"x": 1}}
    client = make_client("gradient", mode, answer(status, body), max_retries=0)
    error = await failure(client)
    assert type(error).__mro__[:2] == (type(error), GradientError)
    assert isinstance(error, dict(STATUS_CLASSES)[status])
    assert (error.type, error.status_code, error.body, error.raw) == (NO_SUCH_NAME, status, body, None)
    request = "(POST https://api.test/api/models/m/complete)"
    assert error.message == f"HTTP {status} {NO_SUCH_NAME}: something new went wrong {request}"


@pytest.mark.parametrize(
    "body",
    [
        {"type": "flaggedContent", "message": "m"},  # a known type without its payload
        {"type": ["flaggedContent"], "message": "m"},
        {"message": "no type"},
        ["not", "an", "object"],
    ],
)
async def test_gradient_untyped_4xx_falls_back_to_the_status_class(make_client: Any, body: Any) -> None:
    client = make_client("gradient", "sync", answer(404, body), max_retries=0)
    error = await failure(client)
    assert type(error) is errors.NotFoundError
    assert error.body == body


@pytest.mark.parametrize(
    ("status", "cls"),
    [(401, errors.AuthenticationError), (403, errors.PermissionDeniedError), (408, APIStatusError),
     (409, errors.ConflictError), (429, errors.RateLimitError)],
)  # fmt: skip
async def test_gradient_typed_body_on_an_actionable_status_keeps_the_status_class(
    make_client: Any, status: int, cls: type[APIStatusError]
) -> None:
    body = {"type": "failed", "message": "slow down"}
    client = make_client("gradient", "sync", answer(status, body), max_retries=0)
    error = await failure(client)
    assert type(error) is cls
    assert error.body == body


async def test_gradient_typed_body_on_a_5xx_is_a_server_error(make_client: Any) -> None:
    client = make_client("gradient", "sync", answer(500, {"type": "failed", "message": "m"}), max_retries=0)
    assert type(await failure(client)) is errors.InternalServerError


@pytest.mark.parametrize("provider", ["scale", "gradient"])
@pytest.mark.parametrize(("status", "cls"), STATUS_CLASSES, ids=[str(s) for s, _ in STATUS_CLASSES])
async def test_status_classes(make_client: Any, mode: str, provider: str, status: int, cls: Any) -> None:
    body = {"detail": "nope"}
    client = make_client(provider, mode, answer(status, body, headers={"x-request-id": "r1"}), max_retries=0)
    error = await failure(client)
    assert type(error) is cls
    assert (error.status_code, error.body, error.request_id, error.retry_after) == (status, body, "r1", None)
    assert str(status) in str(error)
    assert "nope" in str(error)


async def test_scale_422_carries_its_validation_errors(make_client: Any, mode: str) -> None:
    body = {
        "detail": [
            {"loc": ["body", "prompt"], "msg": "Field required", "type": "missing"},
            {"loc": ["body", "stop_sequences", 4], "msg": "Too long", "type": "too_long", "ctx": {"max": 4}},
        ]
    }
    client = make_client("scale", mode, answer(422, body), max_retries=0)
    error = await failure(client)
    assert isinstance(error, UnprocessableEntityError)
    assert error.errors == [
        (("body", "prompt"), "Field required", "missing"),
        (("body", "stop_sequences", 4), "Too long", "too_long"),
    ]
    assert "body.prompt: Field required" in str(error)


@pytest.mark.parametrize("body", [{"detail": "a string"}, {"detail": [{"msg": "no loc"}]}, {}])
async def test_scale_422_of_another_shape_keeps_its_body(make_client: Any, body: Any) -> None:
    error = await failure(make_client("scale", "sync", answer(422, body), max_retries=0))
    assert isinstance(error, UnprocessableEntityError)
    assert error.body == body
    assert error.errors == []


@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_non_json_error_body_is_kept_as_text(make_client: Any, mode: str, provider: str) -> None:
    client = make_client(provider, mode, answer(502, content=b"<html>Bad gateway</html>"), max_retries=0)
    error = await failure(client)
    assert type(error) is errors.InternalServerError
    assert error.body == "<html>Bad gateway</html>"


@pytest.mark.parametrize(
    ("provider", "content"),
    [
        ("scale", b"not json"),
        ("scale", b"[1, 2]"),
        ("scale", b'{"finish_reason": "stop"}'),  # completions missing
        ("scale", b'{"completions": 5}'),
        ("scale", b'{"completions": [["only the prompt"]]}'),
        ("scale", b'{"completions": [["p", [7]]]}'),
        ("scale", b'{"completions": [], "prompt_tokens": "3"}'),
        ("scale", b'{"completions": [], "finish_reason": 1}'),
        (
            "scale",
            b'{"completions": [], "choices": [{"index": 0, "logprobs": {"content": [{"token": "a"}]}}]}',
        ),
        (
            "scale",
            b'{"completions": [], "choices": [{"index": 0, "logprobs": {"content": [{"token": "a", '
            b'"logprob": "x", "top_logprobs": []}]}}]}',
        ),
        ("gradient", b"\xff\xfe"),
        ("gradient", b'{"finishReason": "stop"}'),
        ("gradient", b'{"finishReason": "stop", "generatedOutput": null}'),
    ],
)
async def test_malformed_success_is_a_validation_error(
    make_client: Any, mode: str, provider: str, content: bytes
) -> None:
    client = make_client(provider, mode, answer(200, content=content), max_retries=0)
    error = await failure(client)
    assert type(error) is APIResponseValidationError
    assert error.status_code == 200
    assert error.text == content.decode(errors="replace")


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (("ConnectError", "refused"), APIConnectionError),
        (("RemoteProtocolError", "server disconnected"), APIConnectionError),
        (("ReadTimeout", "slow"), APITimeoutError),
        (("ConnectTimeout", "slow"), APITimeoutError),
    ],
)
async def test_transport_failures(
    make_client: Any, mode: str, library: ModuleType, exc: tuple[str, str], cls: Any
) -> None:
    """Each of the library's transport errors, raised by the client's own transport (httpx2's on httpx2)."""
    name, message = exc
    raised = getattr(library, name)(message)

    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    error = await failure(make_client("scale", mode, handler, max_retries=0))
    assert type(error) is cls
    assert type(error.__cause__) is getattr(library, name)
    assert str(error.__cause__) == message
    assert isinstance(error.request, library.Request)


async def test_a_real_timeout(make_client: Any, server: LocalServer, mode: str) -> None:
    """Over a socket (the async client on aiohttp): a slow answer is an APITimeoutError."""

    def slow(handler: Any) -> None:
        import time

        time.sleep(0.3)
        json_reply(200, scale_body())(handler)

    server.script(slow)
    client = make_client("scale", mode, base_url=server.url, timeout=0.05, max_retries=0)
    assert type(await failure(client)) is APITimeoutError


async def test_a_refused_connection(make_client: Any, mode: str) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = make_client("scale", mode, base_url=f"http://127.0.0.1:{port}", max_retries=0)
    assert type(await failure(client)) is APIConnectionError
