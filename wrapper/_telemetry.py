"""OpenTelemetry GenAI telemetry: one CLIENT span and the GenAI client metrics per logical completion call.

An extra on the clients' hooks (``wrapper.CallHooks``): each API's descriptor gives its clients the
factory ``traced`` (``Api.hooks``), which returns a call's hooks when the application has set a tracer
or meter provider, and None otherwise. Free when it is off: opentelemetry is never imported from here, and
a call looks up the providers in a few dictionary lookups. Prompts and completions are recorded
only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlsplit

from wrapper import CallHooks, CallInfo

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.util.types import AttributeValue

    from wrapper import Completion, CompletionChunk
    from wrapper.errors import APIError

__all__ = ["CAPTURE_CONTENT", "traced"]

CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable that, set to ``true``, records prompts and completions."""

SCOPE = "completion-clients"
RETRY_EVENT = "retry"
RETRY_DELAY = "retry.delay"  # seconds; the GenAI conventions define no retry event
CACHE_HIT = "cache.hit"  # True on a call a response cache answered; the conventions define none

# Explicit bucket boundaries the GenAI conventions advise for their two client histograms.
DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
TOKEN_BUCKETS = tuple(4.0**power for power in range(14))  # 1, 4, 16, ... 67108864

_current: contextvars.ContextVar[_Traced | None] = contextvars.ContextVar("wrapper_telemetry", default=None)


class _Telemetry:
    """The hook factory ``traced``: false while no provider is set, so a call skips it (``HookFactory``)."""

    def __call__(self, call: CallInfo) -> CallHooks | None:
        """The telemetry of one call: its hooks while a tracer or meter provider is set, else None.

        The span is current while the call runs (so HTTP spans are its children), for a stream while
        its request is made (a generator must not leave its context set while it yields). Inside a call
        already traced this records nothing.
        """
        otel = _otel()
        if otel is None or _current.get() is not None:
            return None
        return _Traced(otel, call)

    def __bool__(self) -> bool:
        return _otel() is not None


traced = _Telemetry()


class _Otel(NamedTuple):
    """What telemetry records into: a tracer and the two histograms (each None without its provider)."""

    tracer: Tracer | None
    duration: Histogram | None
    tokens: Histogram | None


_providers: tuple[object, object, _Otel | None] = (None, None, None)


def _otel() -> _Otel | None:
    """The tracer and instruments of the providers set now; None when neither provider is set."""
    global _providers
    tracer_provider = _provider("opentelemetry.trace", "_TRACER_PROVIDER", "get_tracer_provider")
    meter_provider = _provider("opentelemetry.metrics._internal", "_METER_PROVIDER", "get_meter_provider")
    if tracer_provider is None and meter_provider is None:
        return None
    cached = _providers
    if cached[0] is tracer_provider and cached[1] is meter_provider:
        return cached[2]
    otel = _instruments(tracer_provider, meter_provider)
    _providers = (tracer_provider, meter_provider, otel)
    return otel


def _provider(module_name: str, variable: str, getter: str) -> object:
    """The global provider that ``set_*_provider`` stored in ``module_name``, or None.

    Not imported: nobody set one. The module's variable is read rather than calling its ``getter``,
    which looks up an environment variable on every call while no provider is set (a KeyError raised
    and caught each time); the getter is the fallback should a later API version drop the variable.
    """
    module = sys.modules.get(module_name)
    if module is None:
        return None
    provider = getattr(module, variable, _MISSING)
    return getattr(module, getter)() if provider is _MISSING else provider


_MISSING = object()


def _instruments(tracer_provider: Any, meter_provider: Any) -> _Otel | None:
    from opentelemetry import trace
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.metrics._internal import _ProxyMeterProvider  # what get_meter_provider() gives unset

    try:
        from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
        from opentelemetry.semconv.schemas import Schemas
    except ImportError:
        from wrapper.extras import install_hint

        logging.getLogger("wrapper").warning(
            "OpenTelemetry providers are set but opentelemetry-semantic-conventions is not installed: "
            f"no telemetry is recorded ({install_hint('otel')})"
        )
        return None

    version, schema = _version(), Schemas.V1_37_0.value
    tracer = None
    if tracer_provider is not None and not isinstance(
        tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider
    ):
        tracer = tracer_provider.get_tracer(SCOPE, version, schema_url=schema)
    duration = tokens = None
    if meter_provider is not None and not isinstance(meter_provider, _ProxyMeterProvider | NoOpMeterProvider):
        meter = meter_provider.get_meter(SCOPE, version, schema_url=schema)
        duration = meter.create_histogram(
            gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        tokens = meter.create_histogram(
            gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
    if tracer is None and duration is None:
        return None
    return _Otel(tracer, duration, tokens)


@functools.cache
def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(SCOPE)
    except PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=64)
def _server(base_url: str) -> tuple[str, int | None]:
    """``server.address`` and ``server.port`` of a base URL (the port implied by the scheme if none)."""
    url = urlsplit(base_url)
    return url.hostname or "", url.port or {"http": 80, "https": 443}.get(url.scheme)


@functools.cache
def _request_keys(max_tokens: str) -> dict[str, str]:
    """Each request parameter's attribute, by keyword name (``max_tokens``: the API's keyword for it)."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

    return {
        max_tokens: gen_ai.GEN_AI_REQUEST_MAX_TOKENS,
        "temperature": gen_ai.GEN_AI_REQUEST_TEMPERATURE,
        "top_p": gen_ai.GEN_AI_REQUEST_TOP_P,
        "top_k": gen_ai.GEN_AI_REQUEST_TOP_K,
        "stop_sequences": gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES,
        "frequency_penalty": gen_ai.GEN_AI_REQUEST_FREQUENCY_PENALTY,
        "presence_penalty": gen_ai.GEN_AI_REQUEST_PRESENCE_PENALTY,
    }


def _attribute(value: Any) -> AttributeValue | None:
    """``value`` as an attribute value (stop sequences as a list of strings); None if it cannot be one."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return None  # not a valid parameter: the client rejects it, telemetry must not fail first


class _Traced(CallHooks):
    """A call being recorded: its span (if a tracer provider is set) and metrics (if a meter provider is)."""

    __slots__ = (
        "_cached",
        "_capture",
        "_context_token",
        "_current_token",
        "_finish_reason",
        "_input_tokens",
        "_metric_attributes",
        "_otel",
        "_output_tokens",
        "_span",
        "_started",
        "_texts",
    )

    def __init__(self, otel: _Otel, call: CallInfo) -> None:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
        from opentelemetry.semconv.attributes import server_attributes as server
        from opentelemetry.trace import SpanKind

        super().__init__(call)
        client, model = call.client, call.model
        self._otel = otel
        address, port = _server(client.base_url)
        common: dict[str, AttributeValue] = {
            gen_ai.GEN_AI_OPERATION_NAME: gen_ai.GenAiOperationNameValues.TEXT_COMPLETION.value,
            gen_ai.GEN_AI_PROVIDER_NAME: client.API.name,
            gen_ai.GEN_AI_REQUEST_MODEL: model,
            server.SERVER_ADDRESS: address,
        }
        if port is not None:
            common[server.SERVER_PORT] = port
        self._metric_attributes = common
        self._capture = os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"
        self._texts: list[str] = []
        self._cached = False
        self._finish_reason: str | None = None
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._current_token: contextvars.Token[_Traced | None] | None = None
        self._context_token: contextvars.Token[Context] | None = None
        self._span: Span | None = None
        if otel.tracer is not None:
            attributes = dict(common)
            keys = _request_keys(client.API.max_tokens)
            for name, value in call.params.items():
                if name in keys and (attribute := _attribute(value)) is not None:
                    attributes[keys[name]] = attribute
            if call.stream:
                attributes[gen_ai.GEN_AI_REQUEST_STREAM] = True
            if self._capture:
                content = [{"role": "user", "parts": [{"type": "text", "content": call.prompt}]}]
                attributes[gen_ai.GEN_AI_INPUT_MESSAGES] = json.dumps(content, ensure_ascii=False)
            name = f"{gen_ai.GenAiOperationNameValues.TEXT_COMPLETION.value} {model}"
            self._span = otel.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        self._started = time.perf_counter()

    def _activate(self) -> None:
        self._current_token = _current.set(self)
        if self._span is not None:
            from opentelemetry import context, trace

            self._context_token = context.attach(trace.set_span_in_context(self._span))

    def _deactivate(self) -> None:
        if self._context_token is not None:
            from opentelemetry import context

            context.detach(self._context_token)
            self._context_token = None
        if self._current_token is not None:
            _current.reset(self._current_token)
            self._current_token = None

    @contextmanager
    def _active(self) -> Iterator[None]:
        self._activate()
        try:
            yield
        finally:
            self._deactivate()

    def active(self) -> AbstractContextManager[object]:
        return self._active()

    def succeeded(self, completion: Completion | None) -> None:
        if completion is not None:
            self._record(completion)

    def answered(self, completion: Completion | None) -> None:
        self._cached = True
        self.succeeded(completion)

    def chunk(self, chunk: CompletionChunk) -> None:
        self._record(chunk)

    def _record(self, result: Completion | CompletionChunk) -> None:
        if self._capture and result.text:
            self._texts.append(result.text)
        if result.finish_reason is not None:
            self._finish_reason = result.finish_reason
        if result.prompt_tokens is not None:
            self._input_tokens = result.prompt_tokens
        if result.response_tokens is not None:
            self._output_tokens = result.response_tokens

    def retrying(self, error: APIError, retry: int, delay: float) -> None:
        if self._span is None:
            return
        from opentelemetry.semconv.attributes import error_attributes, http_attributes

        attributes: dict[str, AttributeValue] = {
            http_attributes.HTTP_REQUEST_RESEND_COUNT: retry,
            RETRY_DELAY: delay,
            error_attributes.ERROR_TYPE: type(error).__name__,
        }
        status = getattr(error, "status_code", None)
        if isinstance(status, int):
            attributes[http_attributes.HTTP_RESPONSE_STATUS_CODE] = status
        self._span.add_event(RETRY_EVENT, attributes)

    def finished(self, exc: BaseException | None) -> None:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
        from opentelemetry.semconv.attributes import error_attributes

        elapsed = time.perf_counter() - self._started
        # As OpenTelemetry's own spans do, only an Exception is a failure: a stream closed early
        # (GeneratorExit) or a cancelled task is not.
        error = type(exc).__name__ if isinstance(exc, Exception) else None
        metric_attributes = self._metric_attributes
        if error is not None:
            metric_attributes = {**metric_attributes, error_attributes.ERROR_TYPE: error}
        if self._span is not None:
            self._end_span(exc if isinstance(exc, Exception) else None)
        if self._otel.duration is not None:
            self._otel.duration.record(elapsed, metric_attributes)
        if self._otel.tokens is not None:
            for kind, count in (
                (gen_ai.GenAiTokenTypeValues.INPUT.value, self._input_tokens),
                (gen_ai.GenAiTokenTypeValues.OUTPUT.value, self._output_tokens),
            ):
                if count is not None:
                    self._otel.tokens.record(count, {**metric_attributes, gen_ai.GEN_AI_TOKEN_TYPE: kind})

    def _end_span(self, exc: Exception | None) -> None:
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
        from opentelemetry.semconv.attributes import error_attributes
        from opentelemetry.trace import StatusCode

        span = self._span
        assert span is not None
        if self._finish_reason is not None:
            span.set_attribute(gen_ai.GEN_AI_RESPONSE_FINISH_REASONS, [self._finish_reason])
        if self._input_tokens is not None:
            span.set_attribute(gen_ai.GEN_AI_USAGE_INPUT_TOKENS, self._input_tokens)
        if self._output_tokens is not None:
            span.set_attribute(gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS, self._output_tokens)
        if self._cached:
            span.set_attribute(CACHE_HIT, True)
        if self._capture and exc is None:
            message: dict[str, Any] = {
                "role": "assistant",
                "parts": [{"type": "text", "content": "".join(self._texts)}],
            }
            if self._finish_reason is not None:
                message["finish_reason"] = self._finish_reason
            span.set_attribute(gen_ai.GEN_AI_OUTPUT_MESSAGES, json.dumps([message], ensure_ascii=False))
        if exc is not None:
            span.set_attribute(error_attributes.ERROR_TYPE, type(exc).__name__)
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
        span.end()
