"""The sandbox validates request bodies against the normalised specs: a new release's fields and bounds
apply with no edit to the sandbox, and jsonschema's findings are worded as each API words them."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from normalize import normalize

from wrapper import apis as _api
from wrapper._cli import main
from wrapper.errors import APIStatusError
from wrapper.sandbox import Sandbox, _validate
from wrapper.sandbox._registry import registry

ROOT = Path(__file__).resolve().parents[1]
SPEC_FILES = {"gradient": ROOT / "specs" / "gradient.json", "scale": ROOT / "specs" / "scale.yaml"}
GRADIENT_HEADERS = {"authorization": "Bearer t", "x-gradient-workspace-id": "ws"}
Release = Callable[[str, Callable[[dict[str, Any]], None]], None]


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def request_schema(spec: dict[str, Any], api: str) -> dict[str, Any]:
    """The object schema of the request body the sandbox validates for ``api``, in a spec as published."""
    operation = registry()[api].operation
    body = spec["paths"][operation.path][operation.method]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Release:
    """Apply an edit to a copy of one API's spec and make it what the sandbox reads, as `make regen` would.

    Each release is written to a directory of its own: the sandbox compiles a spec once per location.
    """

    def apply(api: str, edit: Callable[[dict[str, Any]], None]) -> None:
        root = tmp_path / f"release-{len(list(tmp_path.iterdir()))}"
        for name, path in SPEC_FILES.items():
            spec = _load(path)
            if name == api:
                edit(spec)
            (root / name).mkdir(parents=True)
            text = json.dumps(normalize(spec), indent=2, sort_keys=True) + "\n"
            (root / name / "spec.json").write_text(text, encoding="utf-8")
        monkeypatch.setattr(_validate, "SPECS", root)

    return apply


@pytest.fixture
def live_sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


def _scale(sb: Sandbox, body: dict[str, Any]) -> httpx.Response:
    url = f"{sb.scale_base_url}/v4/models/llama-3-8b-instruct/completions"
    return httpx.post(url, json=body, headers={"x-api-key": "k"}, timeout=10)


def _gradient(sb: Sandbox, body: dict[str, Any]) -> httpx.Response:
    url = f"{sb.gradient_base_url}/models/nous-hermes2/complete"
    return httpx.post(url, json=body, headers=GRADIENT_HEADERS, timeout=10)


def test_a_new_scale_field_is_accepted_and_its_bounds_and_a_tightened_one_enforced(
    release: Release, live_sandbox: Sandbox
) -> None:
    probe = "sandbox_probe_count"  # a name no vendor spec has
    before = _scale(live_sandbox, {"prompt": "Alice", "max_tokens": 2, probe: 3})
    assert [(e["loc"], e["type"]) for e in before.json()["detail"]] == [(["body", probe], "extra_forbidden")]

    def edit(spec: dict[str, Any]) -> None:
        fields = request_schema(spec, "scale")["properties"]
        fields[probe] = {"type": "integer", "minimum": 1, "maximum": 5, "title": "Probe"}
        fields["top_p"] = {**fields["top_p"], "minimum": 0, "maximum": 1}

    release("scale", edit)
    assert _scale(live_sandbox, {"prompt": "Alice", "max_tokens": 2, probe: 3}).status_code == 200
    too_big = _scale(live_sandbox, {"prompt": "Alice", probe: 9, "top_p": 1.5})
    assert too_big.status_code == 422
    assert too_big.json()["detail"] == [
        {"type": "less_than_equal", "loc": ["body", probe], "input": 9, "ctx": {"le": 5},
         "msg": "Input should be less than or equal to 5"},
        {"type": "less_than_equal", "loc": ["body", "top_p"], "input": 1.5, "ctx": {"le": 1},
         "msg": "Input should be less than or equal to 1"},
    ]  # fmt: skip
    wrong_type = _scale(live_sandbox, {"prompt": "Alice", probe: "three"}).json()["detail"]
    assert [(e["loc"], e["type"], e["msg"]) for e in wrong_type] == [
        (["body", probe], "int_type", "Input should be a valid integer")
    ]


def test_a_new_gradient_field_with_openapi_3_0_bounds_is_enforced(
    release: Release, live_sandbox: Sandbox
) -> None:
    tag, level = "sandboxProbeTag", "sandboxProbeLevel"

    def edit(spec: dict[str, Any]) -> None:
        fields = request_schema(spec, "gradient")["properties"]
        fields[tag] = {"type": "string", "nullable": True, "minLength": 2, "maxLength": 4}
        fields[level] = {"type": "number", "minimum": 0, "exclusiveMinimum": True, "enum": [0.5, 1, 2]}

    release("gradient", edit)
    for ok in ({tag: "abcd"}, {tag: None}, {level: 0.5}):
        answer = _gradient(live_sandbox, {"query": "Alice", "maxGeneratedTokenCount": 2, **ok})
        assert answer.status_code == 200, answer.text
    bad = _gradient(live_sandbox, {"query": "Alice", tag: "abcde", level: 3})
    assert (bad.status_code, bad.json()["type"]) == (400, "bodyParsingError")
    issues = bad.json()["payload"]["validationError"]
    assert [(i["loc"], i["type"], i["msg"], i.get("ctx")) for i in issues] == [
        ([level], "literal_error", "Input should be 0.5, 1 or 2", {"expected": "0.5, 1 or 2"}),
        ([tag], "string_too_long", "String should have at most 4 characters", {"max_length": 4}),
    ]
    assert bad.json()["payload"]["formattedValidationError"] == (
        f"{level}: Input should be 0.5, 1 or 2; {tag}: String should have at most 4 characters"
    )
    short = _gradient(live_sandbox, {"query": "Alice", tag: "a", level: -1}).json()["payload"][
        "validationError"
    ]
    assert [(i["loc"], i["type"]) for i in short] == [
        ([level], "literal_error"),
        ([level], "greater_than"),
        ([tag], "string_too_short"),
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([1], [([], "model_attributes_type")]),  # Gradient's errors point at the field, Scale's at body.field
        ({"query": None}, [(["query"], "string_type")]),
        ({"query": "a", "guidance": {"value": ["x", 5]}}, [(["guidance", "type"], "missing"),
                                                           (["guidance", "value", 1], "string_type")]),
    ],
)  # fmt: skip
def test_gradient_errors_point_at_their_field(
    live_sandbox: Sandbox, body: Any, expected: list[tuple[list[Any], str]]
) -> None:
    issues = _gradient(live_sandbox, body).json()["payload"]["validationError"]
    assert sorted((i["loc"], i["type"]) for i in issues) == sorted(expected)


def test_a_null_for_a_nullable_gradient_object_is_no_value(live_sandbox: Sandbox) -> None:
    answer = _gradient(
        live_sandbox, {"query": "Alice", "guidance": None, "rag": None, "maxGeneratedTokenCount": 2}
    )
    assert answer.status_code == 200, answer.text


def test_a_scale_binding_of_the_wrong_type_is_reported_at_its_key(live_sandbox: Sandbox) -> None:
    body = {"prompt": "a", "model_request_parameters": {"bindings": {"k": [1]}, "other": 1}}
    detail = _scale(live_sandbox, body).json()["detail"]
    assert sorted((e["loc"], e["type"]) for e in detail) == [
        (["body", "model_request_parameters", "bindings", "k"], "string_type"),
        (["body", "model_request_parameters", "other"], "extra_forbidden"),
    ]


# --- a negative token count: the client, the command line and the sandbox agree -----------------------
# Where the spec bounds the max-tokens keyword, the client checks the bound before sending; where it does
# not, the client sends what it is given and the sandbox refuses a negative count as the service does,
# in the API's validation error shape. The command line is the client: its --max-tokens is --param.

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bounded(api: str, keyword: str) -> bool:
    return not set(BOUNDS).isdisjoint(
        importlib.import_module(f"wrapper._generated.{api}.params").KEYWORDS[keyword]["schema"]
    )


def _cli(api: str, sb: Sandbox, *args: str) -> int:
    credentials = [
        flag for credential in _api.get(api).credentials for flag in (credential.flag, "sandbox-credential")
    ]
    model = registry()[api].models[0].id
    argv = [
        "complete",
        api,
        model,
        "Alice",
        "--base-url",
        sb.url + _api.get(api).sandbox_path,
        *credentials,
        *args,
    ]
    try:
        code = main([*argv, "--max-retries", "0"])
    except SystemExit as exited:  # a usage error
        code = int(str(exited.code))
    return code


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("api", _api.NAMES)
def test_a_negative_max_tokens_is_refused_alike_by_the_client_the_command_line_and_the_sandbox(
    live_sandbox: Sandbox, api: str, capsys: pytest.CaptureFixture[str]
) -> None:
    descriptor = _api.get(api)
    keyword, model = descriptor.max_tokens, registry()[api].models[0].id
    credentials = {credential.keyword: "sandbox-credential" for credential in descriptor.credentials}
    url = live_sandbox.url + descriptor.sandbox_path
    with descriptor.clients()[0](**credentials, base_url=url, max_retries=0) as client:
        before = live_sandbox.stats().requests
        if _bounded(api, keyword):  # the spec's bound, checked before sending
            with pytest.raises(ValueError, match=rf"^{keyword} must satisfy ") as refused:
                client.complete(model, "Alice", **{keyword: -3})
            assert live_sandbox.stats().requests == before
            expected, code = str(refused.value), 2
        else:  # sent, and refused by the service in its validation shape
            with pytest.raises(APIStatusError) as refused:
                client.complete(model, "Alice", **{keyword: -3})
            assert live_sandbox.stats().requests == before + 1
            assert refused.value.status_code == 422
            assert refused.value.errors == [
                (("body", keyword), "Input should be greater than or equal to 0", "greater_than_equal")
            ]
            expected, code = str(refused.value).partition(" (POST ")[0], 1
    capsys.readouterr()
    for flags in (["--max-tokens", "-3"], ["--param", f"{keyword}=-3"]):
        assert _cli(api, live_sandbox, *flags) == code
        assert expected in capsys.readouterr().err


def test_the_sandbox_refuses_negative_scale_counts_as_fastapi_would(live_sandbox: Sandbox) -> None:
    answer = _scale(
        live_sandbox,
        {"prompt": "Alice", "max_tokens": -5, "logprobs": True, "top_logprobs": -1, "temperature": 9},
    )
    assert answer.status_code == 422
    assert sorted(
        (e["loc"], e["type"], e["msg"], e["input"], e.get("ctx")) for e in answer.json()["detail"]
    ) == [
        (
            ["body", "max_tokens"],
            "greater_than_equal",
            "Input should be greater than or equal to 0",
            -5,
            {"ge": 0},
        ),
        (["body", "temperature"], "less_than_equal", "Input should be less than or equal to 2", 9, {"le": 2}),
        (
            ["body", "top_logprobs"],
            "greater_than_equal",
            "Input should be greater than or equal to 0",
            -1,
            {"ge": 0},
        ),
    ]
    nothing = _scale(live_sandbox, {"prompt": "Alice", "max_tokens": 0})
    assert (nothing.status_code, nothing.json()["completions"]) == (200, [["Alice", [""]]])


def test_the_sandbox_refuses_a_negative_gradient_count_once_whether_or_not_the_spec_bounds_it(
    release: Release, live_sandbox: Sandbox
) -> None:
    def issues() -> list[tuple[list[Any], str]]:
        answer = _gradient(live_sandbox, {"query": "Alice", "maxGeneratedTokenCount": -5})
        assert (answer.status_code, answer.json()["type"]) == (400, "bodyParsingError")
        return [(i["loc"], i["type"]) for i in answer.json()["payload"]["validationError"]]

    assert issues() == [(["maxGeneratedTokenCount"], "greater_than")]  # the spec's bound alone

    def unbound(spec: dict[str, Any]) -> None:
        count = request_schema(spec, "gradient")["properties"]["maxGeneratedTokenCount"]
        for bound in BOUNDS:
            count.pop(bound, None)

    release("gradient", unbound)
    assert issues() == [(["maxGeneratedTokenCount"], "greater_than_equal")]
    assert _gradient(live_sandbox, {"query": "Alice", "maxGeneratedTokenCount": 600}).status_code == 200
