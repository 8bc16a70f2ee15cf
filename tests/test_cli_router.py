"""``python -m wrapper batch routes ROUTES.json ...``: a resumable batch over the routes of a file, each
result naming its route; a bad routes file is a usage error naming the route and what is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wrapper._cli import main
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox

SCALE_MODEL = "llama-3-8b-instruct"


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[tuple[Sandbox, Sandbox]]:
    with Sandbox(seed=0) as down, Sandbox(seed=1) as up:
        yield down, up


def _routes(tmp_path: Path, routes: list[Any]) -> str:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(routes))
    return str(path)


def _inputs(tmp_path: Path, count: int) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Alice {i}", "id": f"p{i}"}) + "\n" for i in range(count)))
    return str(path)


def test_a_batch_over_routes_fails_over_names_each_results_route_and_resumes(
    sandboxes: tuple[Sandbox, Sandbox], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    down, up = sandboxes
    down.reset()
    up.reset()
    down.inject(status=503, rate=1.0)
    monkeypatch.setenv("SCALE_KEY_OF_THE_TEST", "secret-key-of-the-test")
    routes = _routes(tmp_path, [
        {"api": "scale", "model": SCALE_MODEL, "name": "down", "base_url": down.scale_base_url,
         "api_key_env": "SCALE_KEY_OF_THE_TEST", "requests_per_minute": 60_000},
        {"api": "gradient", "model": "nous-hermes2", "name": "up", "base_url": up.gradient_base_url,
         "access_token": "t", "workspace_id": "w"},
    ])  # fmt: skip
    inputs, output = _inputs(tmp_path, 20), str(tmp_path / "out.jsonl")
    command = ["batch", "routes", routes, inputs, "-o", output, "--max-tokens", "3", "--no-progress"]
    assert main(command) == 0
    lines = list(read_results(output))
    assert sorted(line["id"] for line in lines) == sorted(f"p{i}" for i in range(20))
    assert {line["route"] for line in lines} == {"up"}
    assert all(len(line["text"].split()) <= 3 for line in lines)  # max_tokens, as Gradient names it
    err = capsys.readouterr().err
    assert "20 done, 0 failed" in err
    assert f"{output}: 20 results: 20 succeeded, 0 failed; " in err  # the output's totals, per route
    assert "\n  up: 20 results: 20 succeeded, 0 failed; " in err
    assert main(command) == 0  # resumed: nothing left to send
    assert "0 done, 0 failed, 20 skipped" in capsys.readouterr().err
    assert up.stats().requests == 20


@pytest.mark.parametrize(
    ("routes", "words"),
    [
        ({"api": "scale"}, 'route 1: needs a "model"'),
        ({"api": "openai", "model": "m"}, "route 1: api must be one of 'gradient', 'scale'"),
        (
            {"api": "scale", "model": "m", "api_token": "x"},
            "route 1: unknown key 'api_token'; a scale route's keys",
        ),
        (
            {"api": "scale", "model": "m", "api_key_env": "NO_SUCH_VARIABLE_HERE"},
            "NO_SUCH_VARIABLE_HERE, which is not set",
        ),
        (
            {"api": "scale", "model": "m", "api_key": "k", "weight": -1},
            "route 1: Route 'm': weight must be a number > 0",
        ),
        ([], "must hold a JSON list of routes"),
    ],
)
def test_a_bad_routes_file_is_a_usage_error_naming_the_route(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], routes: Any, words: str
) -> None:
    path = _routes(tmp_path, [routes] if isinstance(routes, dict) else routes)
    with pytest.raises(SystemExit) as exited:
        main(["batch", "routes", path, _inputs(tmp_path, 1), "-o", str(tmp_path / "out.jsonl")])
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_a_keyword_a_route_lacks_is_a_usage_error_before_anything_is_sent(
    sandboxes: tuple[Sandbox, Sandbox], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, up = sandboxes
    up.reset()
    path = _routes(tmp_path, [{"api": "scale", "model": SCALE_MODEL, "name": "s", "api_key": "k",
                               "base_url": up.scale_base_url}])  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "batch",
                "routes",
                path,
                _inputs(tmp_path, 1),
                "-o",
                str(tmp_path / "o.jsonl"),
                "--param",
                "guidance=[1]",
            ]
        )
    assert exited.value.code == 2
    assert "route 's' (scale) has no keyword argument 'guidance'" in capsys.readouterr().err
    assert up.stats().requests == 0
