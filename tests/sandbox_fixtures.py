"""One recording sandbox per test module; at teardown every response it sent is validated against the specs.

Import the fixtures into a test module with
``from sandbox_fixtures import _no_faults_left, recording_sandbox, ...  # noqa: F401``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30Validator, OAS31Validator

from wrapper.gradient import Gradient
from wrapper.sandbox import Exchange, Sandbox
from wrapper.scale import Scale

_SPECS = Path(__file__).resolve().parents[1] / "specs"
_GRADIENT = json.loads((_SPECS / "gradient.json").read_text())
_SCALE = yaml.safe_load((_SPECS / "scale.yaml").read_text())
_GRADIENT_OP = "#/paths/~1models~1{id}~1complete/post/responses"
_SCALE_OP = "#/paths/~1v4~1models~1{model_deployment_id}~1completions/post/responses"


def _validator(spec: dict[str, Any], cls: Any, responses: str, status: str) -> Validator:
    """A validator of the JSON body the spec declares for ``status`` (its ``$ref``s resolved in the spec)."""
    validator: Validator = cls({**spec, "$ref": f"{responses}/{status}/content/application~1json/schema"})
    return validator


_VALIDATORS = {
    ("gradient", "200"): _validator(_GRADIENT, OAS30Validator, _GRADIENT_OP, "200"),
    ("gradient", "4XX"): _validator(_GRADIENT, OAS30Validator, _GRADIENT_OP, "4XX"),
    ("scale", "200"): _validator(_SCALE, OAS31Validator, _SCALE_OP, "200"),
    ("scale", "422"): _validator(_SCALE, OAS31Validator, _SCALE_OP, "422"),
}


def sse_events(body: bytes) -> list[tuple[str | None, str]]:
    """The complete ``(event name, data)`` events of a server-sent-events body (a leading BOM, comment
    lines and events without data, such as keep-alives, left out, as a client leaves them out)."""
    events = []
    for block in body.decode().removeprefix("\ufeff").split("\n\n")[:-1]:  # the last: empty, or cut off
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        fields = dict(line.split(": ", 1) for line in lines)
        if "data" in fields:
            events.append((fields.get("event"), fields["data"]))
    return events


def spec_problems(exchange: Exchange) -> list[str]:
    """Why ``exchange``'s response does not match the spec (empty when it does or the spec says nothing)."""
    if exchange.status is None or (exchange.fault is not None and exchange.fault.malformed):
        return []  # no answer (a reset, or the client left), or a body malformed on purpose
    api = "gradient" if exchange.path.startswith("/api/") else "scale"
    status = "4XX" if api == "gradient" and 400 <= exchange.status < 500 else str(exchange.status)
    validator = _VALIDATORS.get((api, status))
    if validator is None:
        return []
    if exchange.headers.get("content-type", "").startswith("text/event-stream"):
        bodies = [json.loads(data) for event, data in sse_events(exchange.body) if event is None]
    else:
        bodies = [json.loads(exchange.body)]
    return [f"{exchange.method} {exchange.path} {exchange.status}: {e.message}" for b in bodies
            for e in validator.iter_errors(b)]  # fmt: skip


@pytest.fixture(scope="module")
def recording_sandbox() -> Iterator[Sandbox]:
    """A running sandbox (seed 0) shared by the module; fails at teardown if any response broke the spec."""
    with Sandbox(seed=0, record=True) as sb:
        yield sb
    problems = [problem for exchange in sb.exchanges for problem in spec_problems(exchange)]
    assert not problems, "\n".join(problems)
    assert sb.exchanges, "the module sent no request to the sandbox"


@pytest.fixture(autouse=True)
def _no_faults_left(recording_sandbox: Sandbox) -> Iterator[None]:
    """Each test starts with no queued fault."""
    recording_sandbox.clear_faults()
    yield
    recording_sandbox.clear_faults()


@pytest.fixture
def counted_sandbox(recording_sandbox: Sandbox) -> Sandbox:
    """The module's recording sandbox with its request counts reset (``_no_faults_left`` clears faults)."""
    recording_sandbox.reset_stats()
    return recording_sandbox


@pytest.fixture
def scale(recording_sandbox: Sandbox) -> Iterator[Scale]:
    """Our Scale client on the sandbox, without retries."""
    with Scale(api_key="test-key", account_id="acct", base_url=recording_sandbox.scale_base_url,
               max_retries=0, timeout=10) as client:  # fmt: skip
        yield client


@pytest.fixture
def gradient(recording_sandbox: Sandbox) -> Iterator[Gradient]:
    """Our Gradient client on the sandbox, without retries."""
    with Gradient(access_token="test-token", workspace_id="ws", base_url=recording_sandbox.gradient_base_url,
                  max_retries=0, timeout=10) as client:  # fmt: skip
        yield client
