"""Property-based fuzzing of the sandbox's own fault-injection API (``POST /_sandbox/faults``, the
``x-sandbox-fault`` header): whatever a user sends, the sandbox refuses it (400 / 422) or obeys it, and
the requests that follow get either a normal answer or the fault asked for; never a crash of the app
(uvicorn's bare ``500 Internal Server Error``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import httpx
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from wrapper.sandbox import Fault, Sandbox
from wrapper.sandbox._faults import parse_rule

from ._schemas import JSON_VALUES, fuzz_settings

EXAMPLES = 100
fuzz = fuzz_settings(EXAMPLES)
KEYS = sorted({f.name for f in fields(Fault)} - {"delay"} | {"count", "rate", "api", "model"})
"""Every option (``delay`` is drawn on its own: a long one only times the client out)."""
VALUES = (
    JSON_VALUES
    | st.integers(-2, 600)
    | st.floats(-1, 2)
    | st.sampled_from(["json", "shape", "scale", "503", "ping", "error", "a b"])
)
OPTIONS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4) | st.builds(
    lambda options, delay: {**options, "delay": delay},
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3),
    st.floats(-1, 0.01) | st.sampled_from(["x", None, [], "0.01"]),
)
PRINTABLE = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6)
MEANINGFUL = st.sampled_from(["429", "503", "204", "200", "json", "shape", "0", "1", "0.01", "2.5"])
HEADER = st.lists(
    st.builds("{}={}".format, st.sampled_from([*KEYS, "retry-after", ""]), PRINTABLE | MEANINGFUL)
    | st.sampled_from(
        [
            *["reset", "", "=", "status", "status=429", "status=503", "malformed=json", "malformed=shape"],
            *["bom", "done", "unterminated", "stall=1", "end=0", "event=ping", "keepalive=0.01"],
        ]
    ),
    max_size=4,
).map(";".join)
SCALE = (
    "/v4/models/llama-3-8b-instruct/completions",
    {"prompt": "Alice", "max_tokens": 2},
    {"x-api-key": "k"},
)
GRADIENT = (
    "/api/models/nous-hermes2/complete",
    {"query": "Alice", "maxGeneratedTokenCount": 2},
    {"authorization": "Bearer t", "x-gradient-workspace-id": "w"},
)


@pytest.fixture(scope="module")
def http(shared_sandbox: Sandbox) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=shared_sandbox.url, timeout=5.0, limits=httpx.Limits(max_keepalive_connections=0)
    ) as client:
        yield client


def _call(
    http: httpx.Client, api: tuple[str, dict[str, Any], dict[str, str]], fault: str | None, context: object
) -> None:
    """One completion request: any answer but a crash of the sandbox app is fine."""
    path, body, headers = api
    if fault is not None:
        headers = {**headers, "x-sandbox-fault": fault}
    try:
        response = http.post(path, json=body, headers=headers)
    except httpx.TransportError:  # a reset or a cut stream, as asked
        return
    crashed = response.status_code == 500 and not response.headers.get("content-type", "").startswith(
        "application/json"
    )
    assert not crashed, f"the sandbox app crashed ({context!r})"


@fuzz
@given(options=OPTIONS)
def test_fault_rules_are_refused_or_obeyed(
    shared_sandbox: Sandbox, http: httpx.Client, options: dict[str, Any]
) -> None:
    shared_sandbox.clear_faults()
    try:
        answer = http.post("/_sandbox/faults", json=options)
        assert answer.status_code in (200, 400), answer.text
        for api in (SCALE, GRADIENT, SCALE):
            _call(http, api, None, options)
    finally:
        shared_sandbox.clear_faults()


def _expect_refused(api: tuple[str, dict[str, Any], dict[str, str]], response: httpx.Response) -> None:
    """A refused fault header: the API's own error for a bad header, naming it."""
    if api is SCALE:
        assert response.status_code == 422, response.text
        assert [e["loc"] for e in response.json()["detail"]] == [["header", "x-sandbox-fault"]]
    else:
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["type"] == "queryOrPathParsingError"
        assert "x-sandbox-fault" in body["message"]


def _expect_obeyed(
    api: tuple[str, dict[str, Any], dict[str, str]], fault: Fault, response: httpx.Response
) -> None:
    """An obeyed fault header: the status it asks for (in the API's error shape, with its Retry-After
    headers), the malformed body it asks for, or, asking for neither, a normal completion."""
    if fault.status is not None:
        assert response.status_code == fault.status, response.text
        if fault.status in (204, 304):  # no body allowed
            return
        body = response.json()
        assert ("type" in body and "message" in body) if api is GRADIENT else "detail" in body
        if fault.retry_after is not None:
            assert response.headers["retry-after"] == f"{fault.retry_after:g}"
        if fault.retry_after_ms is not None:
            assert response.headers["retry-after-ms"] == str(fault.retry_after_ms)
    elif fault.malformed == "json":
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(response.content)
    elif fault.malformed == "shape":
        assert (response.status_code, response.json()) == (200, {"unexpected": True})
    else:
        assert response.status_code == 200, response.text
        assert ("generatedOutput" if api is GRADIENT else "completions") in response.json()


@fuzz
@given(header=HEADER, api=st.sampled_from([SCALE, GRADIENT]))
@example(header="status= ", api=SCALE)  # a value h11 will not send: refused by the client
def test_fault_headers_are_refused_or_obeyed(
    http: httpx.Client, header: str, api: tuple[str, dict[str, Any], dict[str, str]]
) -> None:
    try:
        rule = parse_rule(header)
    except ValueError:  # the sandbox's own reading of the header: it must then refuse it
        fault: Fault | None = None
    else:
        fault = rule.fault
        assume(fault.delay <= 1)  # a longer wait only times the client out
        assume(fault.status is None or fault.status >= 200)  # 1xx are no final answer
    path, body, headers = api
    # a request id of its own: a count in the header starts afresh, whatever earlier examples sent
    headers = {**headers, "x-sandbox-fault": header, "x-request-id": uuid.uuid4().hex}
    try:
        response = http.post(path, json=body, headers=headers)
    except httpx.LocalProtocolError:
        # Refused by the client, not the sandbox: h11 sends no header value with leading or trailing
        # whitespace (RFC 9110 excludes it from a field value), so this request never left.
        assert header != header.strip(" \t"), f"the client refused {header!r}"
        return
    except httpx.TransportError:
        assert fault is not None, "a refused fault header must get an answer"
        assert fault.reset or fault.cut is not None, f"the connection broke, unasked ({header!r})"
        return
    if fault is None:
        _expect_refused(api, response)
        return
    api_name, model = ("scale", "llama-3-8b-instruct") if api is SCALE else ("gradient", "nous-hermes2")
    if (rule.api or api_name) != api_name or (rule.model or model) != model or rule.rate == 0:
        _expect_obeyed(api, Fault(), response)  # the header selects other requests: served as usual
    elif rule.rate < 1:  # the seeded draw decides: obeyed or served, by the app (a crash has no request id)
        assert response.headers.get("x-request-id", "").startswith("sandbox-"), response.text
    else:
        assert not fault.reset, f"{header!r} asked to reset the connection"
        assert fault.cut is None, f"{header!r} asked to cut the connection"
        _expect_obeyed(api, fault, response)
