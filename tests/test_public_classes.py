"""What users see when they inspect the public classes: the module errors report, their pickles, help()."""

from __future__ import annotations

import ast
import inspect
import pickle
import pydoc
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from helpers import CLASSES, ROOT, call, keyword_schemas, resolve, spec
from overrides import APIS

from wrapper import errors
from wrapper.sandbox import Sandbox

# A model the sandbox does not serve: 404, NotFoundError from Scale, UnknownBaseModelError from Gradient.
UNKNOWN = "zz-no-such-model"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


def client(sandbox: Sandbox, api: str, mode: str) -> Any:
    options: dict[str, Any] = {"max_retries": 0, "timeout": 10}
    if api == "scale":
        options |= {"api_key": "test-key", "base_url": sandbox.scale_base_url}
    else:
        options |= {"access_token": "test-token", "workspace_id": "ws", "base_url": sandbox.gradient_base_url}
    return CLASSES[api][mode == "async"](**options)


async def failure(sandbox: Sandbox, api: str, mode: str) -> errors.APIStatusError:
    made = client(sandbox, api, mode)
    try:
        with pytest.raises(errors.APIStatusError) as caught:
            await call(made.complete(UNKNOWN, "hi"))
    finally:
        await call(made.close())
    return caught.value


def test_every_error_class_reports_the_public_module() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert cls.__module__ == "wrapper.errors", name
        assert repr(cls) == f"<class 'wrapper.errors.{name}'>"


def python(script: str, *, check: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=check
    )


def test_an_uncaught_error_names_its_public_class(sandbox: Sandbox) -> None:
    """A script that never imports ``wrapper.errors`` still shows ``wrapper.errors.NotFoundError``."""
    run = python(
        "from wrapper.scale import Scale\n"
        f"scale = Scale(api_key='test-key', base_url={sandbox.scale_base_url!r}, max_retries=0)\n"
        f"scale.complete({UNKNOWN!r}, 'hi')\n",
        check=False,
    )
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1].startswith("wrapper.errors.NotFoundError: HTTP 404"), run.stderr


async def test_status_and_typed_errors_pickle_with_their_type_message_and_data(
    sandbox: Sandbox, mode: str
) -> None:
    """Ray pickles errors between processes: the copy has the same class, message, body and request."""
    found = [await failure(sandbox, "scale", mode), await failure(sandbox, "gradient", mode)]
    assert type(found[0]) is errors.NotFoundError
    assert isinstance(found[1], errors.UnknownBaseModelError)
    assert isinstance(found[1], errors.NotFoundError)
    for error in found:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (str(copy), copy.args, copy.status_code, copy.body, copy.request_id) == (
            str(error), error.args, error.status_code, error.body, error.request_id
        )  # fmt: skip
        assert copy.request.url == error.request.url
    gradient = found[1]
    assert isinstance(gradient, errors.GradientError)
    copy = pickle.loads(pickle.dumps(gradient))
    assert (copy.type, copy.raw) == (gradient.type, gradient.raw)


async def test_a_fresh_interpreter_unpickles_them(sandbox: Sandbox, tmp_path: Path) -> None:
    found = [await failure(sandbox, "scale", "sync"), await failure(sandbox, "gradient", "sync")]
    pickled = tmp_path / "errors.pickle"
    pickled.write_bytes(pickle.dumps(found))
    run = python(
        f"import pickle, pathlib; found = pickle.loads(pathlib.Path({str(pickled)!r}).read_bytes())\n"
        "print([(repr(type(e)), str(e)) for e in found])\n",
        check=True,
    )
    assert run.stdout.strip() == repr([(repr(type(e)), str(e)) for e in found])


def _entries(doc: str) -> dict[str, str]:
    """The class docstring's ``Keyword arguments:`` list, items ``- ``name`` (``type``): text``:
    keyword -> its ``(type):`` and text (its nested blocks too), one line."""
    section = doc.split("Keyword arguments:\n", 1)[1]
    entries: dict[str, str] = {}
    for line in textwrap.dedent(section).splitlines():
        if item := re.fullmatch(r"- ``(\w+)`` \(``(.+?)``\)(?:: (.*))?", line):
            name = item[1]
            entries[name] = f"({item[2]}):" + (f" {item[3]}" if item[3] else "")
        elif line.strip():
            entries[name] += " " + line.strip()
    return entries


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_help_on_the_params_lists_each_keyword_with_its_type_bound_and_description(api: str) -> None:
    params = getattr(import_module(f"wrapper.{api}"), APIS[api].params_class)  # wrapper.scale.ScaleParams
    shown = pydoc.render_doc(params, renderer=pydoc.plaintext)
    entries = _entries(params.__doc__)
    assert list(entries) == sorted(keyword_schemas(api))
    doc = spec(api)
    for keyword, (_, schema) in keyword_schemas(api).items():
        assert f"- ``{keyword}`` (" in shown
        kind = params.__annotations__[keyword].__forward_arg__.removesuffix(" | None")
        entry = entries[keyword].removeprefix(f"({kind}):")
        assert entry != entries[keyword], (kind, entries[keyword])
        description = " ".join((resolve(doc, schema).get("description") or "").split())
        assert description[:60] in entry, (keyword, entry)
        rules = entry[: entry.index(description[:60])] if description else entry  # what comes before it
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"):
            value = schema.get(bound)
            if isinstance(value, int | float) and not isinstance(value, bool):  # not 3.0's exclusive flags
                assert str(value) in rules, (keyword, bound, entry)


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_each_params_field_keeps_its_own_docstring(api: str) -> None:
    """Documentation tools read a field's docstring from the string right after it."""
    source = (ROOT / "generated" / api / "params.py").read_text()
    name = APIS[api].params_class
    (cls,) = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name]
    documented = {
        field.target.id: after.value.value
        for field, after in zip(cls.body, cls.body[1:], strict=False)
        if isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
        and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
    }  # fmt: skip
    entries = _entries(ast.get_docstring(cls, clean=False) or "")
    for keyword, text in documented.items():
        assert " ".join(text.split())[:60] in entries[keyword]
    assert documented  # every spec here describes some of its fields


@pytest.mark.parametrize("api", ["scale", "gradient"])
def test_the_clients_docstrings_point_at_public_names_only(api: str) -> None:
    """``help(Scale.complete)`` says where its keywords are listed; no docstring names a private module."""
    module = import_module(f"wrapper.{api}")
    params = f"{api.title()}Params"
    for cls in module.CLIENTS:
        assert params in (inspect.getdoc(cls.complete) or "")
        for method in (cls, cls.complete, cls.stream, cls.complete_many):
            doc = inspect.getdoc(method) or ""
            assert "wrapper._" not in doc, (method, doc)
