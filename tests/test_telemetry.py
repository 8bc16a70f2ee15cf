"""OpenTelemetry GenAI telemetry through the public API, against the sandbox on a real socket.

Each test that expects telemetry sets global tracer and meter providers (an in-memory span exporter
and metric reader) and puts the global state back afterwards, so other tests see no provider.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers import (
    ESCAPED_CREDENTIALS,
    LocalServer,
    call,
    echo_secret_reply,
    fragments,
    install_command,
    retry_waits,
    wait_until,
)
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, http_attributes, server_attributes
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from wrapper import _telemetry
from wrapper.errors import APIError, InternalServerError, UnknownBaseModelError
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
# Every request parameter the conventions name, as each provider's keyword arguments.
PARAMS: dict[str, dict[str, Any]] = {
    "scale": {
        "max_tokens": 8,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 20,
        "stop_sequences": ["zzz", "qqq"],
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
    },
    "gradient": {"max_generated_token_count": 8, "temperature": 0.5, "top_p": 0.9, "top_k": 20},
}
EXPECTED_PARAMS: dict[str, dict[str, Any]] = {
    "scale": {
        gen_ai.GEN_AI_REQUEST_MAX_TOKENS: 8,
        gen_ai.GEN_AI_REQUEST_TEMPERATURE: 0.5,
        gen_ai.GEN_AI_REQUEST_TOP_P: 0.9,
        gen_ai.GEN_AI_REQUEST_TOP_K: 20,
        gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES: ("zzz", "qqq"),
        gen_ai.GEN_AI_REQUEST_FREQUENCY_PENALTY: 0.1,
        gen_ai.GEN_AI_REQUEST_PRESENCE_PENALTY: 0.2,
    },
    "gradient": {
        gen_ai.GEN_AI_REQUEST_MAX_TOKENS: 8,
        gen_ai.GEN_AI_REQUEST_TEMPERATURE: 0.5,
        gen_ai.GEN_AI_REQUEST_TOP_P: 0.9,
        gen_ai.GEN_AI_REQUEST_TOP_K: 20,
    },
}
CONTENT_KEYS = {gen_ai.GEN_AI_INPUT_MESSAGES, gen_ai.GEN_AI_OUTPUT_MESSAGES}


class Telemetry(NamedTuple):
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def only_span(self) -> ReadableSpan:
        spans = self.finished()
        assert len(spans) == 1, [span.name for span in spans]
        return spans[0]

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        if data is None:
            return []
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


_GLOBALS = (
    (trace, "_TRACER_PROVIDER_SET_ONCE"),
    (trace, "_TRACER_PROVIDER"),
    (metrics_internal, "_METER_PROVIDER_SET_ONCE"),
    (metrics_internal, "_METER_PROVIDER"),
    (metrics_internal, "_PROXY_METER_PROVIDER"),
)


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    """Global tracer and meter providers recording in memory; the previous global state restored after."""
    saved = [(module, name, getattr(module, name)) for module, name in _GLOBALS]
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._PROXY_METER_PROVIDER = metrics_internal._ProxyMeterProvider()
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield Telemetry(exporter, reader)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
        for module, name, value in saved:
            setattr(module, name, value)


@pytest.fixture(scope="module")
def otel_sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as running:
        yield running


@pytest.fixture
def served(otel_sandbox: Sandbox) -> Iterator[Sandbox]:
    """The module's sandbox, with no fault left over from another test."""
    otel_sandbox.clear_faults()
    yield otel_sandbox
    otel_sandbox.clear_faults()


def client(served: Sandbox, provider: str, mode: str, **options: Any) -> Any:
    options.setdefault("timeout", 10)
    if provider == "scale":
        cls: Any = AsyncScale if mode == "async" else Scale
        return cls(api_key="k", account_id="a", base_url=served.scale_base_url, **options)
    cls = AsyncGradient if mode == "async" else Gradient
    return cls(access_token="t", workspace_id="w", base_url=served.gradient_base_url, **options)


@contextlib.asynccontextmanager
async def _scale(served: Sandbox, mode: str) -> AsyncIterator[Any]:
    """A Scale client of either mode, closed on leaving the block."""
    scale = client(served, "scale", mode)
    try:
        yield scale
    finally:
        closed = scale.close()
        if inspect.isawaitable(closed):
            await closed


async def complete(served: Sandbox, provider: str, mode: str, prompt: str, **params: Any) -> Any:
    """One ``complete`` with a fresh client, closed after (``model`` and ``max_retries`` may be given)."""
    model, max_retries = params.pop("model", MODELS[provider]), params.pop("max_retries", 2)
    if mode == "async":
        async with client(served, provider, mode, max_retries=max_retries) as async_client:
            return await async_client.complete(model, prompt, **params)
    with client(served, provider, mode, max_retries=max_retries) as sync_client:
        return sync_client.complete(model, prompt, **params)


def assert_call_span(span: ReadableSpan, served: Sandbox, provider: str) -> None:
    """The name, kind and identifying attributes every call's span has."""
    host, port = served.url.removeprefix("http://").split(":")
    assert span.name == f"text_completion {MODELS[provider]}"
    assert span.kind is SpanKind.CLIENT
    attributes = span.attributes or {}
    assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == "text_completion"
    assert attributes[gen_ai.GEN_AI_PROVIDER_NAME] == provider
    assert attributes[gen_ai.GEN_AI_REQUEST_MODEL] == MODELS[provider]
    assert attributes[server_attributes.SERVER_ADDRESS] == host
    assert attributes[server_attributes.SERVER_PORT] == int(port)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", ["scale", "gradient"])
async def test_a_complete_is_one_client_span_with_request_and_response_attributes(
    telemetry: Telemetry, served: Sandbox, provider: str, mode: str
) -> None:
    result = await complete(served, provider, mode, "Alice was", **PARAMS[provider])

    span = telemetry.only_span()
    assert_call_span(span, served, provider)
    attributes = dict(span.attributes or {})
    for key, value in EXPECTED_PARAMS[provider].items():
        assert attributes[key] == value, key
    assert attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == (result.finish_reason,)
    if provider == "scale":
        assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == result.prompt_tokens
        assert attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == result.response_tokens
    else:  # Gradient reports no token counts
        assert gen_ai.GEN_AI_USAGE_INPUT_TOKENS not in attributes
        assert gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS not in attributes
    assert gen_ai.GEN_AI_REQUEST_STREAM not in attributes
    assert not CONTENT_KEYS & attributes.keys()
    assert error_attributes.ERROR_TYPE not in attributes
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_stream_is_one_span_ended_with_the_last_chunks_finish_reason_and_counts(
    telemetry: Telemetry, served: Sandbox, mode: str
) -> None:
    async with _scale(served, mode) as scale:
        stream = scale.stream(MODELS["scale"], "Once upon a time", max_tokens=12)
        chunks = [chunk async for chunk in stream] if mode == "async" else list(stream)

    span = telemetry.only_span()
    assert_call_span(span, served, "scale")
    attributes = span.attributes or {}
    assert len(chunks) > 1
    assert attributes[gen_ai.GEN_AI_REQUEST_STREAM] is True
    assert attributes[gen_ai.GEN_AI_REQUEST_MAX_TOKENS] == 12
    assert attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == (chunks[-1].finish_reason,)
    assert attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == chunks[-1].response_tokens
    assert span.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_stream_closed_early_ends_its_span_then_without_an_error(
    telemetry: Telemetry, served: Sandbox, mode: str
) -> None:
    async with _scale(served, mode) as scale:
        stream = scale.stream(MODELS["scale"], "Once upon a time", max_tokens=40)
        if mode == "async":
            await anext(stream)
            assert telemetry.finished() == ()  # still open while the stream is
            await stream.aclose()
        else:
            next(stream)
            assert telemetry.finished() == ()
            stream.close()

        span = telemetry.only_span()
        assert_call_span(span, served, "scale")
        assert span.status.status_code is StatusCode.UNSET
        assert error_attributes.ERROR_TYPE not in (span.attributes or {})
        assert gen_ai.GEN_AI_RESPONSE_FINISH_REASONS not in (span.attributes or {})
        # The consumer's context never saw the stream's span: a call made now is a root span of its own.
        result = scale.complete(MODELS["scale"], "Alice", max_tokens=4)
        if mode == "async":
            await result
    assert [span.parent for span in telemetry.finished()] == [None, None]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_batch_records_one_span_per_prompt_under_the_callers_span(
    telemetry: Telemetry, served: Sandbox, mode: str
) -> None:
    prompts = ["Alice", "The Queen", "The Hatter", "A cat", "The Dodo"]
    async with _scale(served, mode) as scale:
        with trace.get_tracer("test").start_as_current_span("job") as job:
            results = scale.complete_many(MODELS["scale"], prompts, concurrency=3, max_tokens=6)
            done = [r async for r in results] if mode == "async" else list(results)

    assert sorted(r.index for r in done if r.ok) == list(range(len(prompts)))
    spans = [span for span in telemetry.finished() if span.name != "job"]
    assert len(spans) == len(prompts)
    for span in spans:
        assert_call_span(span, served, "scale")
        assert (span.attributes or {})[gen_ai.GEN_AI_REQUEST_MAX_TOKENS] == 6
        assert span.parent is not None
        assert span.parent.span_id == job.get_span_context().span_id
    assert sorted((s.attributes or {})[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] for s in spans) == sorted(
        r.completion.response_tokens for r in done
    )


def test_a_sync_batch_closed_early_ends_its_waiting_prompts_spans_without_an_error(
    telemetry: Telemetry, served: Sandbox
) -> None:
    prompts = ["Alice", "The Queen", "The Hatter"]
    with _scale_sync(served) as scale:
        # One request a minute: the first goes at once, the others wait for their turn until closed.
        results = scale.complete_many(MODELS["scale"], prompts, concurrency=3, requests_per_minute=1)
        assert next(results).ok
        results.close()
        assert wait_until(lambda: len(telemetry.finished()) == len(prompts))

    spans = telemetry.finished()
    assert all(span.status.status_code is StatusCode.UNSET for span in spans)
    assert all(error_attributes.ERROR_TYPE not in (span.attributes or {}) for span in spans)


def test_a_batch_with_a_bad_parameter_raises_the_clients_error_and_records_it(
    telemetry: Telemetry, served: Sandbox
) -> None:
    with _scale_sync(served) as scale, pytest.raises(ValueError, match="temperature"):
        list(scale.complete_many(MODELS["scale"], ["Alice"], temperature=object()))

    attributes = telemetry.only_span().attributes or {}
    assert attributes[error_attributes.ERROR_TYPE] == "ValueError"
    assert gen_ai.GEN_AI_REQUEST_TEMPERATURE not in attributes


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_retried_call_is_one_span_with_a_retry_event(
    telemetry: Telemetry, served: Sandbox, mode: str
) -> None:
    served.inject(status=503, retry_after=1.5, api="scale")  # the next request only

    with retry_waits() as waits:  # testing mode: the retry is decided and logged, not waited for
        result = await complete(served, "scale", mode, "Alice", max_tokens=4)

    assert waits == [1.5]
    span = telemetry.only_span()
    assert span.status.status_code is StatusCode.UNSET
    assert (span.attributes or {})[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == (result.finish_reason,)
    [event] = span.events
    assert event.name == "retry"
    assert dict(event.attributes or {}) == {
        http_attributes.HTTP_REQUEST_RESEND_COUNT: 1,
        "retry.delay": 1.5,
        error_attributes.ERROR_TYPE: "InternalServerError",
        http_attributes.HTTP_RESPONSE_STATUS_CODE: 503,
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_batch_retries_a_prompt_inside_its_own_span(
    telemetry: Telemetry, served: Sandbox, mode: str
) -> None:
    served.inject(status=503, retry_after=1.5, api="scale")
    async with _scale(served, mode) as scale:
        with retry_waits():
            results = scale.complete_many(MODELS["scale"], ["Alice", "The Queen", "A cat"], max_tokens=4)
            done = [r async for r in results] if mode == "async" else list(results)

    assert all(r.ok for r in done)
    spans = telemetry.finished()
    assert len(spans) == 3
    events = [event for span in spans for event in span.events]
    assert [event.name for event in events] == ["retry"]
    assert (events[0].attributes or {})[http_attributes.HTTP_RESPONSE_STATUS_CODE] == 503
    assert (events[0].attributes or {})["retry.delay"] == 1.5
    assert all(span.status.status_code is StatusCode.UNSET for span in spans)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("provider", "model", "prompt", "error"),
    [
        ("scale", MODELS["scale"], "__fail__ Alice", InternalServerError),
        ("gradient", "no-such-model", "Alice", UnknownBaseModelError),
    ],
)
async def test_a_failed_call_sets_error_type_and_status_error(
    telemetry: Telemetry,
    served: Sandbox,
    mode: str,
    provider: str,
    model: str,
    prompt: str,
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        await complete(served, provider, mode, prompt, model=model, max_retries=0)

    span = telemetry.only_span()
    assert span.name == f"text_completion {model}"
    assert (span.attributes or {})[error_attributes.ERROR_TYPE] == error.__name__
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]
    [duration] = telemetry.points(gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION)
    assert duration.attributes[error_attributes.ERROR_TYPE] == error.__name__


@pytest.mark.parametrize("kind", ["json", "status_line"])
async def test_a_credential_the_server_echoes_is_in_no_span(
    telemetry: Telemetry, make_client: Any, server: LocalServer, lane: str, kind: str
) -> None:
    """The exception event (message and stacktrace, the transport's own cause included), the retry
    event and the span's status never show the credential, whatever form the server quoted it in."""
    credentials = ESCAPED_CREDENTIALS["scale"]
    server.script(echo_secret_reply(kind))
    client = make_client("scale", lane, base_url=server.url, max_retries=1, **credentials)
    with pytest.raises(APIError):
        await call(client.complete("m", "p"))

    span = telemetry.only_span()
    retried = [_telemetry.RETRY_EVENT] if kind == "status_line" else []  # a 400 is not retried
    assert [event.name for event in span.events] == [*retried, "exception"]
    texts = [
        str(span.status.description),
        *(str(v) for e in span.events for v in (e.attributes or {}).values()),
    ]
    assert "<redacted>" in texts[0]
    assert [part for part in fragments(credentials["api_key"]) if any(part in text for text in texts)] == []


async def test_a_stream_that_fails_midway_sets_error_type(telemetry: Telemetry, served: Sandbox) -> None:
    with _scale_sync(served) as scale, pytest.raises(InternalServerError):
        for _ in scale.stream(MODELS["scale"], "__fail__ Alice", max_tokens=8):
            pass

    span = telemetry.only_span()
    assert (span.attributes or {})[error_attributes.ERROR_TYPE] == "InternalServerError"
    assert span.status.status_code is StatusCode.ERROR


async def test_no_prompt_or_completion_text_is_recorded_by_default(
    telemetry: Telemetry, served: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_telemetry.CAPTURE_CONTENT, raising=False)
    result = await complete(served, "scale", "sync", "Alice was", max_tokens=6)
    with _scale_sync(served) as scale:
        streamed = "".join(chunk.text for chunk in scale.stream(MODELS["scale"], "Alice was", max_tokens=6))

    for span in telemetry.finished():
        assert not CONTENT_KEYS & (span.attributes or {}).keys()
        texts = [str(value) for value in (span.attributes or {}).values()]
        assert not any(text in value for value in texts for text in ("Alice was", result.text, streamed))


@pytest.mark.parametrize("stream", [False, True])
async def test_content_is_recorded_as_messages_when_the_switch_is_on(
    telemetry: Telemetry, served: Sandbox, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv(_telemetry.CAPTURE_CONTENT, "true")
    with _scale_sync(served) as scale:
        if stream:
            chunks = list(scale.stream(MODELS["scale"], "Alice was", max_tokens=6))
            text, finish_reason = "".join(c.text for c in chunks), chunks[-1].finish_reason
        else:
            result = scale.complete(MODELS["scale"], "Alice was", max_tokens=6)
            text, finish_reason = result.text, result.finish_reason

    attributes = telemetry.only_span().attributes or {}
    assert json.loads(str(attributes[gen_ai.GEN_AI_INPUT_MESSAGES])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Alice was"}]}
    ]
    assert text
    assert json.loads(str(attributes[gen_ai.GEN_AI_OUTPUT_MESSAGES])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": finish_reason}
    ]


async def test_metrics_record_duration_and_token_usage_by_token_type(
    telemetry: Telemetry, served: Sandbox
) -> None:
    scale_result = await complete(served, "scale", "async", "Alice", max_tokens=5)
    await complete(served, "gradient", "sync", "Alice", max_generated_token_count=5)

    durations = telemetry.points(gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION)
    assert sorted(p.attributes[gen_ai.GEN_AI_PROVIDER_NAME] for p in durations) == ["gradient", "scale"]
    for point in durations:
        assert point.count == 1
        assert point.sum > 0
        assert point.attributes[gen_ai.GEN_AI_OPERATION_NAME] == "text_completion"
        assert (
            point.attributes[gen_ai.GEN_AI_REQUEST_MODEL]
            == MODELS[point.attributes[gen_ai.GEN_AI_PROVIDER_NAME]]
        )
        assert server_attributes.SERVER_ADDRESS in point.attributes
        assert error_attributes.ERROR_TYPE not in point.attributes
    usage = {
        (p.attributes[gen_ai.GEN_AI_PROVIDER_NAME], p.attributes[gen_ai.GEN_AI_TOKEN_TYPE]): p.sum
        for p in telemetry.points(gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE)
    }
    # Gradient reports no token counts, so it records no usage.
    assert usage == {
        ("scale", "input"): scale_result.prompt_tokens,
        ("scale", "output"): scale_result.response_tokens,
    }


def test_without_the_semantic_conventions_calls_work_and_record_nothing(
    telemetry: Telemetry, served: Sandbox, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.semconv._incubating.metrics", None)  # not installed

    with _scale_sync(served) as scale:
        assert scale.complete(MODELS["scale"], "Alice", max_tokens=4).text

    assert telemetry.finished() == ()
    assert "opentelemetry-semantic-conventions is not installed" in caplog.text
    assert install_command("otel").search(caplog.text), caplog.text


async def test_nothing_is_recorded_or_looked_up_when_no_provider_is_set(
    served: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert isinstance(metrics.get_meter_provider(), metrics_internal._ProxyMeterProvider)
    looked_up: list[str] = []
    monkeypatch.setattr(trace.ProxyTracerProvider, "get_tracer", lambda *a, **k: looked_up.append("tracer"))
    monkeypatch.setattr(
        metrics_internal._ProxyMeterProvider, "get_meter", lambda *a, **k: looked_up.append("meter")
    )

    await complete(served, "scale", "async", "Alice", max_tokens=4)
    with _scale_sync(served) as scale:
        list(scale.stream(MODELS["scale"], "Alice", max_tokens=4))
        list(scale.complete_many(MODELS["scale"], ["Alice", "A cat"], max_tokens=4))

    assert looked_up == []


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_provider_set_after_the_client_was_built_traces_its_next_calls(
    served: Sandbox, mode: str, request: pytest.FixtureRequest
) -> None:
    scale = client(served, "scale", mode)
    try:
        untraced = scale.complete(MODELS["scale"], "Alice", max_tokens=4)
        if mode == "async":
            await untraced
        telemetry: Telemetry = request.getfixturevalue("telemetry")  # the providers, set from here on
        traced = scale.complete(MODELS["scale"], "A cat", max_tokens=4)
        if mode == "async":
            await traced
    finally:
        closed = scale.close()
        if inspect.isawaitable(closed):
            await closed

    assert_call_span(telemetry.only_span(), served, "scale")
    assert telemetry.points("gen_ai.client.operation.duration")


def test_the_clients_never_import_opentelemetry(served: Sandbox) -> None:
    code = textwrap.dedent(f"""
        import sys
        from wrapper.gradient import Gradient
        from wrapper.scale import Scale

        with Scale(api_key="k", base_url={served.scale_base_url!r}, timeout=10) as scale:
            scale.complete("llama-3-8b-instruct", "Alice", max_tokens=4)
            list(scale.stream("llama-3-8b-instruct", "Alice", max_tokens=4))
        url = {served.gradient_base_url!r}
        with Gradient(access_token="t", workspace_id="w", base_url=url, timeout=10) as gradient:
            gradient.complete("nous-hermes2", "Alice")
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
    """)
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert run.stdout.strip() == "[]"


def _scale_sync(served: Sandbox) -> Scale:
    scale: Scale = client(served, "scale", "sync")
    return scale


@pytest.mark.usefixtures("telemetry")
async def test_a_cache_hit_is_marked_on_its_span(
    telemetry: Telemetry, served: Sandbox, mode: str, tmp_path: Path
) -> None:
    from wrapper._telemetry import CACHE_HIT

    scale = client(served, "scale", mode, cache=str(tmp_path / "cache.db"))
    try:
        for _ in range(2):
            result = scale.complete(MODELS["scale"], "Alice was", max_tokens=4)
            if inspect.isawaitable(result):
                await result
    finally:
        closed = scale.close()
        if inspect.isawaitable(closed):
            await closed
    miss, hit = telemetry.finished()
    assert CACHE_HIT not in (miss.attributes or {})
    assert hit.attributes is not None
    assert hit.attributes[CACHE_HIT] is True
    assert (
        hit.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS]
        == miss.attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS]
    )  # type: ignore[index]
