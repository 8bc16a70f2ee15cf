"""scripts/normalize.py names things by the shape of a spec, so later vendor versions go through too."""

import copy
import json
from pathlib import Path

import yaml
from normalize import normalize

SPECS = Path(__file__).resolve().parent.parent / "specs"
GRADIENT = json.loads((SPECS / "gradient.json").read_text())
SCALE = yaml.safe_load((SPECS / "scale.yaml").read_text())
REF = "#/components/schemas/"


def test_gradient_error_variants_are_named_after_their_type_with_a_discriminator() -> None:
    out = normalize(GRADIENT)
    schemas = out["components"]["schemas"]
    union = schemas["CompleteModelError"]
    names = [ref["$ref"].removeprefix(REF) for ref in union["oneOf"]]
    assert names == [
        "FlaggedContentError", "BodyParsingError", "QueryOrPathParsingError", "FailedError",
        "ModelDoesNotSupportGuidanceError", "NoRagDocumentsFoundError", "RagRequiresAutoTemplatingError",
        "UnknownBaseModelError", "UnknownModelAdapterError", "UnknownRagCollectionError",
        "UnprocessableContentError",
    ]  # fmt: skip
    assert union["discriminator"]["propertyName"] == "type"
    assert union["discriminator"]["mapping"]["flaggedContent"] == REF + "FlaggedContentError"
    published = GRADIENT["components"]["schemas"]["CompleteModelError"]["oneOf"]
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


def test_a_union_without_one_tag_per_variant_is_left_as_written() -> None:
    spec = copy.deepcopy(GRADIENT)
    del spec["components"]["schemas"]["CompleteModelError"]["oneOf"][0]["properties"]["type"]["enum"]
    out = normalize(spec)
    assert "discriminator" not in out["components"]["schemas"]["CompleteModelError"]
    assert "FailedError" not in out["components"]["schemas"]


def test_request_defaults_move_to_descriptions_so_only_given_fields_are_sent() -> None:
    props = normalize(SCALE)["components"]["schemas"]["CompletionRequestV2"]["properties"]
    assert "default" not in props["temperature"]
    assert props["temperature"]["description"].endswith("Server default: 0.2.")
    assert props["stream"]["description"] == (
        "Flag indicating whether to stream the completion response Server default: false."
    )
    response = normalize(SCALE)["components"]["schemas"]["CompletionResponse"]["properties"]
    assert response["prompt_tokens"]["default"] == 0  # response defaults stay: they fill absent fields
    gradient = normalize(GRADIENT)["components"]["schemas"]["CompleteModelBodyParams"]["properties"]
    assert "default" not in gradient["autoTemplate"]
