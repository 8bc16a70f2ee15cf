"""The sandbox's credentials (the given ones only, or any but ``invalid``) and ``any_model``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from wrapper import errors
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale


@pytest.fixture(scope="module")
def strict() -> Iterator[Sandbox]:
    """A sandbox taking one Scale key and one Gradient token, and serving any model id."""
    with Sandbox(api_key="the-key", access_token="the-token", any_model=True) as sb:
        yield sb


def _scale(sb: Sandbox, key: str) -> Scale:
    return Scale(api_key=key, account_id="a", base_url=sb.scale_base_url, max_retries=0)


def _gradient(sb: Sandbox, token: str) -> Gradient:
    return Gradient(access_token=token, workspace_id="w", base_url=sb.gradient_base_url, max_retries=0)


def test_only_the_given_credentials_are_accepted(strict: Sandbox) -> None:
    with _scale(strict, "the-key") as scale, _gradient(strict, "the-token") as gradient:
        assert scale.complete("llama-3-8b-instruct", "Alice", max_tokens=2).response_tokens == 2
        assert gradient.complete("nous-hermes2", "Alice", max_generated_token_count=2).text
    with _scale(strict, "another-key") as scale, pytest.raises(errors.AuthenticationError) as refused:
        scale.complete("llama-3-8b-instruct", "Alice")
    assert "the API key sent was refused" in str(refused.value)
    with _gradient(strict, "another-token") as gradient, pytest.raises(errors.AuthenticationError) as token:
        gradient.complete("nous-hermes2", "Alice")
    assert "the access token sent was refused" in str(token.value)


def test_by_default_any_credential_but_invalid_is_accepted_and_the_401_says_which_case() -> None:
    with Sandbox() as sb:
        with _scale(sb, "whatever") as scale:
            assert scale.complete("llama-3-8b-instruct", "Alice", max_tokens=1).text
        with _scale(sb, "invalid") as scale, pytest.raises(errors.AuthenticationError) as refused:
            scale.complete("llama-3-8b-instruct", "Alice")
        assert "the API key sent was refused" in str(refused.value)
        assert "send the" not in str(refused.value)
        with _gradient(sb, "invalid") as gradient, pytest.raises(errors.AuthenticationError) as token:
            gradient.complete("nous-hermes2", "Alice")
        assert "the access token sent was refused" in str(token.value)
        url = f"{sb.scale_base_url}/v4/models/llama-3-8b-instruct/completions"
        missing = httpx.post(url, json={"prompt": "Alice"})
        assert missing.json()["detail"] == "Not authenticated: send the x-api-key header"
        gradient_url = f"{sb.gradient_base_url}/models/nous-hermes2/complete"
        no_token = httpx.post(gradient_url, json={"query": "Alice"}, headers={"x-gradient-workspace-id": "w"})
        assert no_token.json()["message"] == "Not authenticated: send 'Authorization: Bearer <token>'"
        with _scale(sb, "k") as scale, pytest.raises(errors.NotFoundError):
            scale.complete("model_deployment_id", "Alice")  # without any_model, an unknown id is a 404


def test_any_model_serves_placeholder_ids_with_the_first_model(strict: Sandbox) -> None:
    with _scale(strict, "the-key") as scale, _gradient(strict, "the-token") as gradient:
        placeholder = scale.complete("model_deployment_id", "Alice", max_tokens=6, temperature=0)
        default = scale.complete("llama-3-8b-instruct", "Alice", max_tokens=6, temperature=0)
        assert placeholder.text == default.text  # the same model answered
        assert [c.text for c in scale.stream("model_deployment_id", "Alice", max_tokens=3)]
        guided = gradient.complete("model_id", "Is Alice tall?", guidance=["yes", "no"])
        assert guided.text in ("yes", "no")  # served by nous-hermes2, which takes guidance
        adapter = gradient.complete("some_model_adapter", "Alice", max_generated_token_count=2)
        assert adapter.text


@pytest.mark.parametrize("bad", ["", " padded "])
def test_a_credential_that_could_never_match_is_refused_at_construction(bad: str) -> None:
    with pytest.raises(ValueError, match="api_key must be a non-empty string"):
        Sandbox(api_key=bad)
    with pytest.raises(ValueError, match="access_token must be a non-empty string"):
        Sandbox(access_token=bad)
