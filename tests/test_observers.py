"""What users watch httpx with sees every request of every client, on ``complete`` and ``stream``, once each.

The clients are built as in production: the async ones notice the watcher and send through httpx
(``wrapper._core.transports.choice.AsyncTransports.pick``). respx's two mockers, OpenTelemetry's httpx
instrumentation and Sentry's httpx integration are the real packages. pytest-httpx, proxies and CA
bundles are in tests/test_mocking.py and tests/test_network.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import httpx
import pytest
import respx
from helpers import CLASSES, CREDENTIALS, call, collect
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wrapper.sandbox import Sandbox

MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
CLIENTS = [(provider, mode) for provider in ("scale", "gradient") for mode in ("sync", "async")]


def base_url(sandbox: Sandbox, provider: str) -> str:
    return sandbox.scale_base_url if provider == "scale" else sandbox.gradient_base_url


async def complete_and_stream(provider: str, mode: str, url: str) -> None:
    """One ``complete`` and one ``stream`` on a default client: two requests."""
    client = CLASSES[provider][mode == "async"](**CREDENTIALS[provider], base_url=url)
    try:
        assert (await call(client.complete(MODELS[provider], "Alice", **{client.API.max_tokens: 3}))).text
        chunks = await collect(client.stream(MODELS[provider], "Alice"))
        assert "".join(chunk.text for chunk in chunks)
    finally:
        await call(client.close())


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("using", ["httpcore", "httpx"])
@pytest.mark.parametrize(("provider", "mode"), CLIENTS)
async def test_both_respx_mockers_see_complete_and_stream(provider: str, mode: str, using: str) -> None:
    url = f"https://{provider}.mocked.test" + ("/api" if provider == "gradient" else "")
    event = json.dumps({"completions": [["Alice", ["mocked"]]], "finish_reason": "stop"})
    scale = {"completions": [["Alice", ["mocked"]]], "finish_reason": "stop"}
    gradient = {"generatedOutput": "mocked", "finishReason": "stop"}

    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=headers, content=f"data: {event}\n\n".encode())
        return httpx.Response(200, json=gradient if provider == "gradient" else scale)

    with respx.mock(using=using, assert_all_mocked=True) as router:
        route = router.post(url__startswith=url).mock(side_effect=answer)
        await complete_and_stream(provider, mode, url)
    assert route.call_count == 2


@pytest.fixture
def http_spans() -> Iterator[InMemorySpanExporter]:
    """OpenTelemetry's httpx instrumentation on, its spans kept in memory; off again after the test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("provider", "mode"), CLIENTS)
async def test_opentelemetry_httpx_instrumentation_sees_each_request_once(
    sandbox: Sandbox, http_spans: InMemorySpanExporter, provider: str, mode: str
) -> None:
    await complete_and_stream(provider, mode, base_url(sandbox, provider))
    spans = http_spans.get_finished_spans()
    assert [
        span.attributes.get("http.request.method", span.attributes.get("http.method")) for span in spans
    ] == [
        "POST",
        "POST",
    ]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_users_http_client_sends_every_request(sandbox: Sandbox, mode: str) -> None:
    seen: list[str] = []
    hooks = {"request": [lambda request: seen.append(request.url.path)]}

    async def ahook(request: httpx.Request) -> None:
        seen.append(request.url.path)

    if mode == "sync":
        http: httpx.Client | httpx.AsyncClient = httpx.Client(event_hooks=hooks)
    else:
        http = httpx.AsyncClient(event_hooks={"request": [ahook]})
    client = CLASSES["scale"][mode == "async"](
        **CREDENTIALS["scale"], base_url=sandbox.scale_base_url, http_client=http
    )
    try:
        await call(client.complete(MODELS["scale"], "Alice", max_tokens=2))
        await collect(client.stream(MODELS["scale"], "Alice", max_tokens=2))
    finally:
        await call(client.close())
    assert seen == [f"/v4/models/{MODELS['scale']}/completions"] * 2
    assert http.is_closed


SENTRY = """
import asyncio, json, sys
import sentry_sdk
from sentry_sdk.integrations.httpx import HttpxIntegration
from sentry_sdk.transport import Transport
from wrapper.scale import AsyncScale, Scale

envelopes = []

class Kept(Transport):
    def capture_envelope(self, envelope):
        envelopes.append(envelope)

sentry_sdk.init(
    dsn="http://key@127.0.0.1:9/1", transport=Kept, traces_sample_rate=1.0,
    default_integrations=False, auto_enabling_integrations=False, integrations=[HttpxIntegration()],
)
url, model = sys.argv[1], sys.argv[2]

async def run_async():
    async with AsyncScale(api_key="k", base_url=url) as scale:
        await scale.complete(model, "Alice", max_tokens=2)
        [c async for c in scale.stream(model, "Alice", max_tokens=2)]

with sentry_sdk.start_transaction(name="sync"):
    with Scale(api_key="k", base_url=url) as scale:
        scale.complete(model, "Alice", max_tokens=2)
        list(scale.stream(model, "Alice", max_tokens=2))
with sentry_sdk.start_transaction(name="async"):
    asyncio.run(run_async())
sentry_sdk.flush()
counts = {}
for envelope in envelopes:
    for item in envelope.items:
        if item.type == "transaction":
            event = item.payload.json
            counts[event["transaction"]] = sum(span["op"] == "http.client" for span in event["spans"])
print(json.dumps(counts))
"""


def test_sentrys_httpx_integration_sees_each_request_once(sandbox: Sandbox) -> None:
    """In a process of its own: Sentry's integration patches httpx for good once set up."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SENTRY), sandbox.scale_base_url, MODELS["scale"]],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout) == {"sync": 2, "async": 2}
