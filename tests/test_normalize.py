"""scripts/normalize.py names things by the shape of a spec, so later vendor versions go through too."""

import copy
import json
from pathlib import Path

import pytest
import yaml
from normalize import NormalizationError, normalize, pascal_case

SPECS = Path(__file__).resolve().parent.parent / "specs"
GRADIENT = json.loads((SPECS / "gradient.json").read_text())
SCALE = yaml.safe_load((SPECS / "scale.yaml").read_text())
REF = "#/components/schemas/"


def test_gradient_error_variants_are_named_after_their_type_with_a_discriminator() -> None:
    out = normalize(GRADIENT)
    schemas = out["components"]["schemas"]
    union = schemas["CompleteModelError"]
    names = [ref["$ref"].removeprefix(REF) for ref in union["oneOf"]]
    published = GRADIENT["components"]["schemas"]["CompleteModelError"]["oneOf"]
    tags = [variant.get("properties", {}).get("type", {}).get("enum", [None])[0] for variant in published]
    expected = [
        pascal_case(tag) + ("" if tag.endswith("Error") else "Error")
        if tag
        else pascal_case(variant.get("title", "")) or f"CompleteModelErrorVariant{index + 1}"
        for index, (tag, variant) in enumerate(zip(tags, published, strict=True))
    ]
    assert names == expected
    if all(tags):
        assert union["discriminator"]["propertyName"] == "type"
        assert union["discriminator"]["mapping"] == {t: REF + n for t, n in zip(tags, names, strict=True)}
    else:  # a union with untagged variants has no discriminator
        assert "discriminator" not in union
    for name, variant in zip(names, published, strict=True):
        assert schemas[name] == variant  # moved, not altered


def test_nullable_inline_objects_get_names_and_stay_nullable() -> None:
    out = normalize(GRADIENT)
    props = out["components"]["schemas"]["CompleteModelBodyParams"]["properties"]
    assert props["guidance"] == {
        "allOf": [{"$ref": REF + "CompleteModelBodyParamsGuidance"}],
        "nullable": True,
    }
    assert out["components"]["schemas"]["CompleteModelBodyParamsRag"]["required"] == ["collectionId"]


def test_private_keys_dropped_and_operation_ids_cleaned() -> None:
    gradient, scale = normalize(GRADIENT), normalize(SCALE)
    assert "_id" not in gradient
    assert "x-readme" not in gradient
    assert gradient["paths"]["/models/{id}/complete"]["post"]["operationId"] == "complete_model"
    operation = scale["paths"]["/v4/models/{model_deployment_id}/completions"]["post"]
    assert operation["operationId"] == "create_completion"
    assert "x-codeSamples" in operation  # a real OpenAPI extension: kept


def test_module_path_schema_names_become_their_titles_and_refs_follow() -> None:
    out = normalize(SCALE)
    schemas = out["components"]["schemas"]
    assert {"Choice", "ChoiceLogprobs", "ChatCompletionTokenLogprob", "TopLogprob"} <= set(schemas)
    assert not [name for name in schemas if "__" in name]
    assert REF + "egp_api" not in json.dumps(out)
    assert schemas["Choice"]["properties"]["logprobs"] == {"$ref": REF + "ChoiceLogprobs"}


def test_input_untouched_and_output_deterministic() -> None:
    before = copy.deepcopy(GRADIENT)
    first, second = normalize(GRADIENT), normalize(GRADIENT)
    assert before == GRADIENT
    assert json.dumps(first) == json.dumps(second)


def test_a_later_version_with_new_variants_and_operations_is_named_the_same_way() -> None:
    spec = copy.deepcopy(GRADIENT)
    variants = spec["components"]["schemas"]["CompleteModelError"]["oneOf"]
    variants.append(copy.deepcopy(variants[3]))
    variants[-1]["properties"]["type"]["enum"] = ["quotaExceeded"]
    spec["paths"]["/models/{id}/adapters"] = {
        "get": {"operationId": "GET-/models/{id}/adapters", "responses": {"200": {"description": "ok"}}},
        "post": {"operationId": "createAdapter", "responses": {"200": {"description": "ok"}}},
        "delete": {"operationId": "x/y", "responses": {"200": {"description": "ok"}}},
    }
    out = normalize(spec)
    assert out["components"]["schemas"]["QuotaExceededError"]["properties"]["type"]["enum"] == [
        "quotaExceeded"
    ]
    ops = {m: op["operationId"] for m, op in out["paths"]["/models/{id}/adapters"].items()}
    assert ops == {"get": "list_adapters", "post": "create_adapter", "delete": "delete_adapter"}


def test_untagged_variants_get_stable_names_and_the_tagged_keep_theirs() -> None:
    spec = copy.deepcopy(GRADIENT)
    variants = spec["components"]["schemas"]["CompleteModelError"]["oneOf"]
    tags = [variant.get("properties", {}).get("type", {}).get("enum", [None])[0] for variant in variants]
    untagged = next(index for index, tag in enumerate(tags) if tag)
    del variants[untagged]["properties"]["type"]["enum"]  # no tag, and no title
    variants.append(
        {"type": "object", "title": "Legacy problem", "properties": {"error": {"type": "string"}}}
    )
    out = normalize(spec)
    union = out["components"]["schemas"]["CompleteModelError"]
    names = [ref["$ref"].removeprefix(REF) for ref in union["oneOf"]]
    assert names[untagged] == f"CompleteModelErrorVariant{untagged + 1}"
    assert names[-1] == "LegacyProblem"
    for index, tag in enumerate(tags):
        if tag and index != untagged:
            assert names[index] == pascal_case(tag) + ("" if tag.endswith("Error") else "Error")
    assert "discriminator" not in union  # not every variant has a tag
    assert normalize(spec) == out  # stable


def test_a_name_clash_fails_naming_the_schema_path() -> None:
    spec = copy.deepcopy(GRADIENT)
    variants = spec["components"]["schemas"]["CompleteModelError"]["oneOf"]
    variants.append(copy.deepcopy(variants[3]))  # the same tag twice
    with pytest.raises(NormalizationError, match=r"#/components/schemas/CompleteModelError/oneOf/\d+: .*tag"):
        normalize(spec)


@pytest.mark.parametrize("form", ["anyOf", "oneOf", "type-list"])
def test_openapi_31_nullable_enums_and_objects_are_named_like_30_ones(form: str) -> None:
    spec = copy.deepcopy(SCALE)
    enum = {"type": "string", "enum": ["auto", "flex"]}
    obj = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}

    def nullable(schema: dict[str, object]) -> dict[str, object]:
        if form == "type-list":
            return {**schema, "type": [schema["type"], "null"], "title": "T"}
        return {form: [schema, {"type": "null"}], "title": "T", "description": "d"}

    spec["components"]["schemas"]["CompletionRequestV2"]["properties"]["service_tier"] = nullable(enum)
    spec["components"]["schemas"]["CompletionResponse"]["properties"]["usage"] = nullable(obj)
    schemas = normalize(spec)["components"]["schemas"]
    assert schemas["CompletionRequestV2ServiceTier"] == enum
    assert schemas["CompletionResponseUsage"] == obj
    prop = schemas["CompletionResponse"]["properties"]["usage"]
    assert prop["anyOf"] == [{"$ref": REF + "CompletionResponseUsage"}, {"type": "null"}]
    assert prop["title"] == "T"


def test_request_defaults_move_to_descriptions_so_only_given_fields_are_sent() -> None:
    props = normalize(SCALE)["components"]["schemas"]["CompletionRequestV2"]["properties"]
    assert "default" not in props["temperature"]
    assert props["temperature"]["description"].endswith("Server default: 0.2.")
    assert props["temperature"]["x-server-default"] == 0.2  # kept for the wrapper: does a request sample?
    assert props["stream"]["description"] == (
        "Flag indicating whether to stream the completion response Server default: false."
    )
    response = normalize(SCALE)["components"]["schemas"]["CompletionResponse"]["properties"]
    assert response["prompt_tokens"]["default"] == 0  # response defaults stay: they fill absent fields
    gradient = normalize(GRADIENT)["components"]["schemas"]["CompleteModelBodyParams"]["properties"]
    assert "default" not in gradient["autoTemplate"]
    assert gradient["autoTemplate"]["x-server-default"] is True
