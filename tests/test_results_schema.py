"""One results format: the command line's lines, ``BatchResult.to_dict()`` (sync, async, a fan-out) and
``Completion.to_dict()`` validate against the JSON Schema docs/batches.md publishes (Ray's rows: in
tests/test_ray.py, which has the cluster)."""

# ruff: noqa: F811  (the shared fixtures are imported, then named as parameters)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas
import pytest
from helpers import result_schema
from jsonschema import Draft202012Validator
from sandbox_fixtures import _no_faults_left, counted_sandbox, recording_sandbox  # noqa: F401

from wrapper import Route, Router
from wrapper._cli import main
from wrapper.batch import RESULT_FIELDS, read_results
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

MODELS = ("llama-3-8b-instruct", "mistral-7b-instruct")
VALIDATOR = Draft202012Validator(result_schema(), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _valid(line: dict[str, Any]) -> None:
    problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(line)]
    assert not problems, (line, problems)


def test_the_published_schema_is_a_schema_and_names_every_field() -> None:
    Draft202012Validator.check_schema(result_schema())
    assert set(result_schema()["required"]) == set(RESULT_FIELDS)
    _ok = {field: None for field in RESULT_FIELDS}
    assert not VALIDATOR.is_valid({**_ok, "error": None})  # a success has its text
    assert not VALIDATOR.is_valid({**_ok, "text": "x", "prompt_tokens": 1.5})  # token counts are integers
    assert not VALIDATOR.is_valid({**_ok, "error": "BadRequestError: no"})  # an error is an object


def test_the_command_lines_lines_validate(counted_sandbox: Sandbox, tmp_path: Path) -> None:
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [{"id": f"q{i}", "prompt": f"Alice {i}"} for i in range(4)]
    inputs.write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + '{"id": [1], "prompt": "x"}\nnot json\n'
    )
    counted_sandbox.inject(status=503, count=1, api="scale", model=MODELS[1])
    flags = [
        "--base-url",
        counted_sandbox.scale_base_url,
        "--api-key",
        "k",
        "--max-retries",
        "0",
        "--no-progress",
    ]
    command = ["batch", "scale", ",".join(MODELS), str(inputs), "-o", str(output), "--param", "logprobs=true"]
    assert main([*command, *flags]) == 1
    results = list(read_results(str(output)))
    assert len(results) == 12
    for line in results:
        _valid(line)
    kinds = {(line["error"] or {}).get("type") for line in results}
    assert kinds == {None, "InternalServerError", "InputLineError"}
    assert [line["id"] for line in results if line["index"] == 4] == [[1], [1]]  # a refused line keeps its id
    assert all(line["logprobs"] for line in results if line["error"] is None)
    frame = pandas.DataFrame(results).convert_dtypes()  # as docs/batches.md loads them
    assert str(frame["prompt_tokens"].dtype) == str(frame["response_tokens"].dtype) == "Int64"
    assert frame["id"].notna().sum() == 10  # every line's but the one not JSON, refused ones too


def test_to_dict_of_a_batchs_results_validates(counted_sandbox: Sandbox) -> None:
    counted_sandbox.inject(status=400, count=1, api="scale")
    with Scale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        results = list(
            scale.complete_many(MODELS[0], ["Alice", "Bill"], return_exceptions=True, max_tokens=2)
        )
        fanned = list(Router([Route(scale, m) for m in MODELS]).fan_out(["Alice"], max_tokens=2))
    assert sorted(r.ok for r in results) == [False, True]
    for result in [*results, *fanned]:
        line = result.to_dict()
        _valid(line)
        assert set(line) - {"index", "target"} == set(RESULT_FIELDS)
        if result.completion is not None:  # a completion's fields, as Completion.to_dict() gives them
            own = result.completion.to_dict()
            _valid({**own, "error": None})
            assert {k: own[k] for k in RESULT_FIELDS if k != "error"} == {
                k: line[k] for k in RESULT_FIELDS if k != "error"
            }
    assert {r.to_dict()["target"] for r in fanned} == set(MODELS)


async def test_to_dict_of_an_async_batchs_results_validates(counted_sandbox: Sandbox) -> None:
    async with AsyncScale(api_key="k", account_id="a", base_url=counted_sandbox.scale_base_url) as scale:
        results = [r async for r in scale.complete_many(MODELS[0], ["Alice"], max_tokens=2, logprobs=True)]
    [line] = [r.to_dict() for r in results]
    _valid(line)
    assert isinstance(line["prompt_tokens"], int)
    assert line["logprobs"]


@pytest.mark.parametrize("bad", [{"index": -1}, {"fingerprint": "not a hash"}, {"error": {"type": "X"}}])
def test_lines_that_break_the_format_do_not_validate(bad: dict[str, Any]) -> None:
    line = {**dict.fromkeys(RESULT_FIELDS), "text": "x", **bad}
    assert not VALIDATOR.is_valid(line)
