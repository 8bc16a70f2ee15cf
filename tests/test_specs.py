"""The vendor documents in specs/ are valid OpenAPI and keep everything the vendors published."""

import json
from pathlib import Path

import pytest
import yaml
from normalize import normalize
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

SPECS = Path(__file__).resolve().parent.parent / "specs"


def load(name: str) -> dict:
    text = (SPECS / name).read_text()
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


@pytest.mark.parametrize("name", ["gradient.json", "scale.yaml"])
def test_spec_is_valid_openapi_once_normalised(name: str) -> None:
    validate(normalize(load(name)))


def test_scale_spec_is_valid_openapi_as_published() -> None:
    validate(load("scale.yaml"))


def test_gradient_spec_as_published_breaks_openapi_only_with_its_private_id_key() -> None:
    spec = load("gradient.json")
    with pytest.raises(OpenAPIValidationError, match="'_id' was unexpected"):
        validate(spec)
    validate({key: value for key, value in spec.items() if key != "_id"})


def test_gradient_spec_is_the_published_document() -> None:
    spec = load("gradient.json")
    assert spec["openapi"] == "3.0.3"
    assert "_id" in spec  # as published: the normaliser drops it and x-readme, not specs/
    assert "x-readme" in spec
    variants = spec["components"]["schemas"]["CompleteModelError"]["oneOf"]
    assert len(variants) >= 11  # as published; a later release may add


def test_scale_spec_keeps_everything_the_flattened_copy_had() -> None:
    spec = load("scale.yaml")
    operation = spec["paths"]["/v4/models/{model_deployment_id}/completions"]["post"]
    assert spec["servers"] == [{"url": "https://api.egp.scale.com"}]
    assert spec["security"] == []
    assert spec["tags"] == [{"name": "Models", "description": "Model API."}]
    assert [p["name"] for p in operation["parameters"]] == ["model_deployment_id"]
    assert set(operation["responses"]) == {"200", "422"}
    assert [s["lang"] for s in operation["x-codeSamples"]] == ["Python", "Go"]
    compile(operation["x-codeSamples"][0]["source"], "sample", "exec")  # the rebuilt Python sample runs
    schemas = spec["components"]["schemas"]
    # The flattened copy's counts; a vendor's later release may add to them, never lose them here.
    assert len(schemas) >= 9
    request = schemas["CompletionRequestV2"]
    assert len(request["properties"]) >= 15
    temperature = request["properties"]["temperature"]
    assert temperature["description"].startswith("What sampling temperature to use, between [0, 2].")
    assert temperature | {"description": ""} == {
        "title": "Temperature", "description": "", "default": 0.2,
        "type": "number", "maximum": 2, "minimum": 0,
    }  # fmt: skip
    assert request["properties"]["reasoning_effort"]["enum"] == ["low", "medium", "high"]
    assert request["properties"]["stop_sequences"]["maxItems"] == 4
    assert request["additionalProperties"] is False
    pair = schemas["CompletionResponse"]["properties"]["completions"]["items"]
    assert pair["minItems"] == pair["maxItems"] == 2
    assert pair["prefixItems"] == [{"type": "string"}, {"items": {"type": "string"}, "type": "array"}]
    assert "| LLM Engine |" in request["properties"]["max_tokens"]["description"].splitlines()[5]
