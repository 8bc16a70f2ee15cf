"""The vendors' own SDKs (scale-gp, gradientai) work against the sandbox for every model it lists."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import httpx
import pytest
from gradientai.openapi.client.api.models_api import ModelsApi
from gradientai.openapi.client.api_client import ApiClient
from gradientai.openapi.client.configuration import Configuration
from gradientai.openapi.client.models.complete_model_body_params import CompleteModelBodyParams
from sandbox_fixtures import _no_faults_left, recording_sandbox  # noqa: F401
from scale_gp import SGPClient

from wrapper.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


def listed(recording_sandbox: Sandbox, api: str) -> list[str]:
    return [model["id"] for model in httpx.get(f"{recording_sandbox.url}/_sandbox/models").json()[api]]


def test_scale_gp_completes_and_streams_with_every_listed_deployment(recording_sandbox: Sandbox) -> None:
    with SGPClient(
        api_key="k", account_id="a", base_url=recording_sandbox.scale_base_url, max_retries=0
    ) as client:
        for model in listed(recording_sandbox, "scale"):
            result = client.models.completions.create(
                model_deployment_id=model, prompt="Alice", max_tokens=6, temperature=0
            )
            assert result.completions[0][0] == "Alice"
            assert result.completions[0][1][0].strip()
            assert (result.finish_reason, result.response_tokens) == ("length", 6)
            chunks = list(
                client.models.completions.create(
                    model_deployment_id=model, prompt="Alice", max_tokens=6, temperature=0, stream=True
                )
            )
            streamed = "".join(chunk.completions[0][1][0] for chunk in chunks)
            assert streamed == result.completions[0][1][0]


def test_gradientai_completes_with_every_listed_model(recording_sandbox: Sandbox) -> None:
    configuration = Configuration(host=recording_sandbox.gradient_base_url, access_token="tok")
    with ApiClient(configuration) as api_client:
        models = ModelsApi(api_client)
        for model in listed(recording_sandbox, "gradient"):
            body = CompleteModelBodyParams(query="Alice", max_generated_token_count=6, temperature=0)
            result = models.complete_model(
                id=model, x_gradient_workspace_id="ws", complete_model_body_params=body
            )
            assert result.generated_output.strip()
            assert result.finish_reason in ("length", "stop")


def test_gradientai_guidance_answers_one_of_the_choices(recording_sandbox: Sandbox) -> None:
    guided = [
        m["id"]
        for m in httpx.get(f"{recording_sandbox.url}/_sandbox/models").json()["gradient"]
        if m["guidance"]
    ]
    configuration = Configuration(host=recording_sandbox.gradient_base_url, access_token="tok")
    with ApiClient(configuration) as api_client:
        body = CompleteModelBodyParams.from_dict(
            {"query": "Is Alice tall?", "guidance": {"type": "choice", "value": ["yes", "no"]}}
        )
        result = ModelsApi(api_client).complete_model(
            id=guided[0], x_gradient_workspace_id="ws", complete_model_body_params=body
        )
    assert result.generated_output in ("yes", "no")


def test_the_vendors_placeholder_ids_are_served_with_any_model() -> None:
    with Sandbox(any_model=True) as sb:
        with SGPClient(api_key="k", account_id="a", base_url=sb.scale_base_url, max_retries=0) as client:
            result = client.models.completions.create(
                model_deployment_id="model_deployment_id", prompt="Alice", max_tokens=4
            )
        assert result.response_tokens == 4
        with ApiClient(Configuration(host=sb.gradient_base_url, access_token="tok")) as api_client:
            body = CompleteModelBodyParams(query="Alice", max_generated_token_count=4)
            answer = ModelsApi(api_client).complete_model(
                id="model_id", x_gradient_workspace_id="ws", complete_model_body_params=body
            )
        assert answer.generated_output.strip()
