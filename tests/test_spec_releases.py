"""Vendor releases applied to a copy of the project: ``scripts/regen.py`` there, its tests, no other edit.

Each release edits the copy's specs/, regenerates once, then runs the copy's spec-driven tests and
a check of the new thing through the copy's public API (sync and async clients against a local
server, the CLI, ``wrapper.errors``, mypy, the sandbox) in one subprocess. The CLI and mypy, which
cannot depend on the client's mode, run once a release; mypy shares the session's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT, SPEC_FILES, error_class_name, raw_spec
from normalize import pascal_case

COPIED = ("wrapper", "generated", "scripts", "specs", "tests", "pyproject.toml")
VALIDATION, ERRORS, REQUESTS = (
    "tests/test_client_validation.py",
    "tests/test_client_errors.py",
    "tests/test_client_requests.py",
)
GENERATED, NORMALIZE = "tests/test_generated.py", "tests/test_normalize.py"
pytestmark = [
    pytest.mark.timeout(900),  # a regen and a test run of the copy each
    pytest.mark.long("parallel"),  # 53-151 s of one process in make test
]


def _camel(name: str) -> str:
    """``zz_release_field`` as a Gradient body field: ``zzReleaseField``."""
    head, _, rest = name.partition("_")
    return head + pascal_case(rest)


def _unused(*candidates: str) -> str:
    """The first candidate that neither spec mentions (as it is, in camelCase or PascalCase)."""
    text = "".join(path.read_text() for path in SPEC_FILES.values())
    return next(c for c in candidates if all(form not in text for form in (c, _camel(c), pascal_case(c))))


def _gradient_variants() -> list[dict[str, Any]]:
    schemas = raw_spec("gradient")["components"]["schemas"]
    variants: list[dict[str, Any]] = schemas["CompleteModelError"]["oneOf"]
    return variants


def _top_p_maximum() -> float:
    """A tighter maximum for Scale's ``top_p`` than the spec's (1 when it has none)."""
    request = raw_spec("scale")["components"]["schemas"]["CompletionRequestV2"]["properties"]
    current = request["top_p"].get("maximum")
    return 1 if current is None else round(current * 0.9, 6)


AGAIN = ("", "_b", "_c", "_d", "_e", "_f")  # suffixes, for a release tried on specs that already hold it
NEW = _unused(*(f"zz_release_field{again}" for again in AGAIN))  # a keyword; Gradient's field is camelCase
NEW_WIRE = _camel(NEW)
TAG = _unused(*(_camel(f"zz_quota_exceeded{again}") for again in AGAIN))  # a Gradient error type
TAG_CLASS = error_class_name(TAG)
UNTAGGED = f"CompleteModelErrorVariant{len(_gradient_variants()) + 1}"  # the name normalize gives it
TOP_P_MAX = _top_p_maximum()

# Shared by every release's check module: run the CLI and mypy in the copy.
CHECK_HEADER = """
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import GRADIENT_BODY, LocalServer, call, json_reply, scale_body

from wrapper.sandbox import Sandbox

COPY = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(COPY)}
    cmd = [sys.executable, "-m", "wrapper", "complete", *args, "--max-retries", "0", "--timeout", "10"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=COPY, timeout=60)


def mypy(source: str, tmp_path: Path) -> str:  # with the cache MYPY_CACHE_DIR names, else the copy's own
    snippet = tmp_path / "snippet.py"
    snippet.write_text(source)
    cmd = [sys.executable, "-m", "mypy", "--strict", str(snippet)]
    env = {**os.environ, "PYTHONPATH": str(COPY)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=COPY, timeout=300).stdout
"""


def project_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    ignore = shutil.ignore_patterns("__pycache__", ".mypy_cache", ".pytest_cache")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():  # symlinks as links: the copy's wrapper/_generated is its own generated/
            shutil.copytree(source, copy / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(source, copy / name)
    return copy


def apply_release(root: Path, name: str) -> None:
    """Edit ``root``'s specs/ as the release ``name`` (a key of ``RELEASES``) does.

    To try one on a whole checkout: ``PYTHONPATH=scripts python tests/test_spec_releases.py NAME``, then
    ``make regen && make test``.
    """
    api, change = RELEASES[name]
    path = root / "specs" / SPEC_FILES[api].name
    doc = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2) if path.suffix == ".json" else yaml.safe_dump(doc))


def release(tmp_path: Path, mypy_cache: Path, name: str, relevant: tuple[str, ...], check: str) -> str:
    """Apply the release ``name`` to a copy's specs/, regenerate, run the ``relevant`` tests and ``check``
    (its sandbox test last) with mypy on ``mypy_cache``; return regen's report."""
    copy = project_copy(tmp_path)
    apply_release(copy, name)
    env = {**os.environ, "PYTHONPATH": str(copy), "MYPY_CACHE_DIR": str(mypy_cache)}
    regen = subprocess.run(
        [sys.executable, "scripts/regen.py"], cwd=copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert regen.returncode == 0, regen.stdout + regen.stderr
    (copy / "tests" / "test_release_check.py").write_text(CHECK_HEADER + textwrap.dedent(check))
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly", "-p", "no:cacheprovider"]
    tests = subprocess.run(
        [*cmd, *relevant, "tests/test_release_check.py"],
        cwd=copy, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-2000:]
    return regen.stdout


def scale_request(doc: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = doc["components"]["schemas"]["CompletionRequestV2"]["properties"]
    return properties


def gradient_schemas(doc: dict[str, Any]) -> dict[str, Any]:
    schemas: dict[str, Any] = doc["components"]["schemas"]
    return schemas


def bounded_field_and_tightened_bound(doc: dict[str, Any]) -> None:
    request = scale_request(doc)
    request[NEW] = {"type": "integer", "minimum": 1, "maximum": 10, "title": "New", "description": "New."}
    request["top_p"].update(minimum=0, maximum=TOP_P_MAX)


def test_a_new_bounded_scale_field_and_a_tightened_bound(tmp_path: Path, mypy_cache: Path) -> None:
    report = release(
        tmp_path,
        mypy_cache,
        "bounded_field_and_tightened_bound",
        (VALIDATION, REQUESTS),
        f'''
        async def test_new_field_end_to_end(make_client, mode, server: LocalServer) -> None:
            server.script(json_reply(200, scale_body()))
            client = make_client("scale", mode, base_url=server.url, timeout=10)
            await call(client.complete("m", "hi", {NEW}=3, top_p={TOP_P_MAX / 2}))
            assert server.requests[-1][3] == {{"prompt": "hi", "{NEW}": 3, "top_p": {TOP_P_MAX / 2}}}
            for bad in ({{"{NEW}": 11}}, {{"{NEW}": 0}}, {{"top_p": {TOP_P_MAX + 0.5}}}, {{"top_p": -0.1}}):
                with pytest.raises(ValueError, match=next(iter(bad))):
                    await call(client.complete("m", "hi", **bad))
            assert len(server.requests) == 1

        def test_the_cli_and_mypy_take_the_new_field(server: LocalServer, tmp_path) -> None:
            server.script(json_reply(200, scale_body()))
            done = cli("scale", "m", "hi", "--param", "{NEW}=4", "--base-url", server.url, "--api-key", "k")
            assert done.returncode == 0, done.stderr
            assert server.requests[-1][3]["{NEW}"] == 4
            args = ["--base-url", server.url, "--api-key", "k"]
            refused = cli("scale", "m", "hi", "--param", "{NEW}=40", *args)
            assert refused.returncode == 2
            assert "{NEW}" in refused.stderr

            out = mypy(
                "from wrapper.scale import Scale\\n"
                "Scale(api_key='k').complete('m', 'p', {NEW}=3)\\n"
                "Scale(api_key='k').complete('m', 'p', zz_unknown_keyword=3)\\n",
                tmp_path,
            )
            assert 'Unexpected keyword argument "zz_unknown_keyword"' in out, out
            assert "{NEW}" not in out, out

        def test_the_sandbox_accepts_the_field_and_enforces_the_bounds() -> None:
            with Sandbox() as sandbox, httpx.Client(base_url=sandbox.url, timeout=10) as http:
                url, headers = "/v4/models/llama-3-8b-instruct/completions", {{"x-api-key": "k"}}
                ok = http.post(url, headers=headers, json={{"prompt": "hi", "{NEW}": 3, "max_tokens": 2}})
                assert ok.status_code == 200, ok.text
                for bad in ({{"{NEW}": 11}}, {{"top_p": {TOP_P_MAX + 0.5}}}):
                    answer = http.post(url, headers=headers, json={{"prompt": "hi", **bad}})
                    assert answer.status_code == 422, answer.text
        ''',
    )
    assert f"+ keyword ScaleParams.{NEW}: int | None optional" in report
    assert any(
        line.strip().startswith("BREAKING") and "constraint CompletionRequestV2.top_p.maximum" in line
        for line in report.splitlines()
    ), report


def gradient_field_and_error_variant(doc: dict[str, Any]) -> None:
    schemas = gradient_schemas(doc)
    schemas["CompleteModelBodyParams"]["properties"][NEW_WIRE] = {
        "type": "string", "nullable": True, "maxLength": 8, "description": "New.",
    }  # fmt: skip
    variants = schemas["CompleteModelError"]["oneOf"]
    tagged = next(v for v in reversed(variants) if "type" in v.get("properties", {}))
    variant = json.loads(json.dumps(tagged))
    variant["properties"]["type"]["enum"] = [TAG]
    variants.append(variant)


def test_a_new_gradient_field_and_error_variant(tmp_path: Path, mypy_cache: Path) -> None:
    report = release(
        tmp_path,
        mypy_cache,
        "gradient_field_and_error_variant",
        (VALIDATION, ERRORS, GENERATED),
        f'''
        async def test_new_field_and_error(make_client, mode, server: LocalServer) -> None:
            from wrapper.errors import BadRequestError, GradientError, {TAG_CLASS}

            server.script(json_reply(200, GRADIENT_BODY))
            client = make_client("gradient", mode, base_url=server.url + "/api", timeout=10, max_retries=0)
            await call(client.complete("m", "hi", {NEW}="abc"))
            assert server.requests[-1][3] == {{"query": "hi", "{NEW_WIRE}": "abc"}}
            with pytest.raises(ValueError, match="{NEW}"):
                await call(client.complete("m", "hi", {NEW}="x" * 9))

            server.script(json_reply(400, {{"type": "{TAG}", "message": "over quota"}}))
            with pytest.raises({TAG_CLASS}) as caught:
                await call(client.complete("m", "hi"))
            assert isinstance(caught.value, GradientError)
            assert isinstance(caught.value, BadRequestError)  # the status class of its status
            assert (caught.value.type, caught.value.raw.message) == ("{TAG}", "over quota")

        def test_the_cli_and_mypy_take_the_new_field_and_error(server: LocalServer, tmp_path) -> None:
            server.script(json_reply(200, GRADIENT_BODY))
            args = ["--base-url", server.url + "/api", "--access-token", "t", "--workspace-id", "w"]
            done = cli("gradient", "m", "hi", "--param", "{NEW}=abc", *args)
            assert done.returncode == 0, done.stderr
            assert server.requests[-1][3]["{NEW_WIRE}"] == "abc"

            out = mypy(
                "from wrapper.errors import {TAG_CLASS}\\n"
                "from wrapper.gradient import Gradient\\n"
                "g = Gradient(access_token='t', workspace_id='w')\\n"
                "g.complete('m', 'p', {NEW}='abc')\\n"
                "g.complete('m', 'p', zz_unknown_keyword=3)\\n",
                tmp_path,
            )
            assert 'Unexpected keyword argument "zz_unknown_keyword"' in out, out
            assert "{NEW}" not in out and "{TAG_CLASS}" not in out, out

        def test_the_sandbox_accepts_the_field_and_enforces_its_bound() -> None:
            with Sandbox() as sandbox, httpx.Client(base_url=sandbox.url, timeout=10) as http:
                url = "/api/models/nous-hermes2/complete"
                headers = {{"authorization": "Bearer t", "x-gradient-workspace-id": "w"}}
                ok = http.post(url, headers=headers, json={{"query": "hi", "{NEW_WIRE}": "abc"}})
                assert ok.status_code == 200, ok.text
                bad = http.post(url, headers=headers, json={{"query": "hi", "{NEW_WIRE}": "x" * 9}})
                assert 400 <= bad.status_code < 500, bad.text
        ''',
    )
    assert f"+ error-variant {TAG}: {TAG_CLASS} class" in report
    assert f"+ keyword GradientParams.{NEW}: str | None optional" in report


def untagged_variant(doc: dict[str, Any]) -> None:
    gradient_schemas(doc)["CompleteModelError"]["oneOf"].append(
        {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}
    )


def test_an_untagged_error_variant(tmp_path: Path, mypy_cache: Path) -> None:
    release(
        tmp_path,
        mypy_cache,
        "untagged_variant",
        (ERRORS, GENERATED, NORMALIZE),
        f"""
        async def test_untagged_body_keeps_its_status_class(make_client, mode, server: LocalServer) -> None:
            from wrapper._generated.gradient.models import {UNTAGGED}
            from wrapper.errors import BadRequestError

            assert {UNTAGGED}.from_dict({{"error": "e"}}).error == "e"
            server.script(json_reply(400, {{"error": "legacy"}}))
            client = make_client("gradient", mode, base_url=server.url + "/api", timeout=10, max_retries=0)
            with pytest.raises(BadRequestError) as caught:
                await call(client.complete("m", "hi"))
            assert type(caught.value) is BadRequestError
            assert caught.value.body == {{"error": "legacy"}}
        """,
    )


def nullable_enum_and_response_object(doc: dict[str, Any]) -> None:
    scale_request(doc)[NEW] = {
        "anyOf": [{"type": "string", "enum": ["auto", "flex"]}, {"type": "null"}], "title": "Tier",
    }  # fmt: skip
    doc["components"]["schemas"]["CompletionResponse"]["properties"]["usage"] = {
        "anyOf": [
            {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]},
            {"type": "null"},
        ],
        "title": "Usage",
    }


def test_a_31_nullable_enum_and_a_nullable_inline_response_object(tmp_path: Path, mypy_cache: Path) -> None:
    release(
        tmp_path,
        mypy_cache,
        "nullable_enum_and_response_object",
        (VALIDATION, REQUESTS, GENERATED),
        f'''
        async def test_enum_and_response_object(make_client, mode, server: LocalServer) -> None:
            from wrapper._generated.scale.models import CompletionResponseUsage

            server.script(json_reply(200, scale_body(usage={{"total": 7}})))
            client = make_client("scale", mode, base_url=server.url, timeout=10)
            result = await call(client.complete("m", "hi", {NEW}="flex"))
            assert server.requests[-1][3] == {{"prompt": "hi", "{NEW}": "flex"}}
            assert isinstance(result.raw.usage, CompletionResponseUsage)
            assert result.raw.usage.total == 7
            server.script(json_reply(200, scale_body(usage=None)))
            assert (await call(client.complete("m", "hi"))).raw.usage is None
            with pytest.raises(ValueError, match="{NEW}"):
                await call(client.complete("m", "hi", {NEW}="slow"))

        def test_the_cli_and_mypy_take_the_enum(server: LocalServer, tmp_path) -> None:
            server.script(json_reply(200, scale_body()))
            args = ["--base-url", server.url, "--api-key", "k"]
            done = cli("scale", "m", "hi", "--param", "{NEW}=auto", *args)
            assert done.returncode == 0, done.stderr
            out = mypy(
                "from wrapper.scale import Scale\\n"
                "Scale(api_key='k').complete('m', 'p', {NEW}='auto')\\n"
                "Scale(api_key='k').complete('m', 'p', {NEW}='slow')\\n",
                tmp_path,
            )
            assert out.count("error:") == 1 and ":3:" in out, out

        def test_the_sandbox_accepts_the_enum() -> None:
            with Sandbox() as sandbox, httpx.Client(base_url=sandbox.url, timeout=10) as http:
                url, headers = "/v4/models/llama-3-8b-instruct/completions", {{"x-api-key": "k"}}
                body = {{"prompt": "hi", "{NEW}": "flex", "max_tokens": 2}}
                ok = http.post(url, headers=headers, json=body)
                assert ok.status_code == 200, ok.text
                bad = http.post(url, headers=headers, json={{"prompt": "hi", "{NEW}": "slow"}})
                assert bad.status_code == 422, bad.text
        ''',
    )


RELEASES: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "bounded_field_and_tightened_bound": ("scale", bounded_field_and_tightened_bound),
    "gradient_field_and_error_variant": ("gradient", gradient_field_and_error_variant),
    "untagged_variant": ("gradient", untagged_variant),
    "nullable_enum_and_response_object": ("scale", nullable_enum_and_response_object),
}
"""Each release: the spec it edits, and the edit."""

if __name__ == "__main__":
    apply_release(ROOT, sys.argv[1])
