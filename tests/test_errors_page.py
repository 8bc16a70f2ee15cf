"""docs/reference/errors.md shows the whole error tree as text, readable without the site: the tree is
built from ``wrapper.errors`` and compared with the page's, and each status and Gradient error ``type``
the page names is answered to the clients to see which class they raise."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from helpers import ROOT, call, error_variants, sample, spec

from wrapper import errors

PAGE = ROOT / "docs" / "reference" / "errors.md"
LINE = re.compile(r"(?P<tree>[│├└─ ]*)(?P<name>\w+)(?: {2,}(?P<note>.*))?")
BUILTIN = {"Exception": None, "UserWarning": "UserWarning"}  # the page's roots, by the base in the code


def page_tree() -> dict[str, tuple[str | None, str]]:
    """Each class on the page's tree: its name -> (its parent there, None at the top; what becomes it)."""
    block = PAGE.read_text().split("```text\n", 1)[1].split("```", 1)[0]
    tree: dict[str, tuple[str | None, str]] = {}
    above: list[str] = []  # the line's ancestors, outermost first
    for line in block.splitlines():
        found = LINE.fullmatch(line)
        assert found, f"not a line of the tree: {line!r}"
        del above[len(found["tree"]) // 4 :]
        tree[found["name"]] = (above[-1] if above else None, found["note"] or "")
        above.append(found["name"])
    return tree


def code_tree() -> dict[str, str | None]:
    """Each class of ``wrapper.errors``: its name -> the class above it in the tree (its nearest base in
    ``wrapper.errors``, else the built-in base the page shows as a root, None for ``Exception``)."""
    tree: dict[str, str | None] = {}
    for name in errors.__all__:
        cls = getattr(errors, name)
        ours = [base.__name__ for base in cls.__mro__[1:] if base.__name__ in errors.__all__]
        tree[name] = ours[0] if ours else BUILTIN[cls.__bases__[0].__name__]
    return tree


def notes(prefix: str) -> dict[str, str]:
    """What the page says becomes each class, for the notes that start with ``prefix`` (``HTTP ``,
    ``type ``): the word after it -> the class."""
    return {
        note.removeprefix(prefix).split(";")[0].split()[0]: name
        for name, (_, note) in page_tree().items()
        if note.startswith(prefix)
    }


def test_the_page_shows_every_class_under_its_parent() -> None:
    page = page_tree()
    assert {name: parent for name, (parent, _) in page.items() if name in errors.__all__} == code_tree()
    assert set(page) - set(errors.__all__) == {root for root in BUILTIN.values() if root}  # the roots only


def _answer(status: int, body: Any) -> Any:
    return lambda request: httpx.Response(status, json=body)


STATUSES = notes("HTTP ")


@pytest.mark.parametrize("provider", ["scale", "gradient"])
@pytest.mark.parametrize("status", [*STATUSES, "402", "408", "418", "307"])
async def test_each_status_raises_the_class_the_page_names(
    make_client: Any, provider: str, status: str
) -> None:
    """``HTTP 5xx`` is tried as 500 and 503; a status the page does not name is ``APIStatusError``'s."""
    for code in (500, 503) if status == "5xx" else (int(status),):
        client = make_client(provider, "sync", _answer(code, {"detail": "no"}), max_retries=0)
        with pytest.raises(errors.APIStatusError) as caught:
            await call(client.complete("m", "p"))
        assert type(caught.value).__name__ == STATUSES.get(status, "APIStatusError"), code


def test_the_page_names_every_gradient_error_type() -> None:
    assert set(notes("type ")) == set(error_variants())


@pytest.mark.parametrize(("type_", "name"), sorted(notes("type ").items()))
async def test_each_gradient_type_raises_the_class_the_page_names(
    make_client: Any, type_: str, name: str
) -> None:
    body = {**sample(spec("gradient"), error_variants()[type_][1]), "type": type_, "message": "no"}
    client = make_client("gradient", "sync", _answer(400, body), max_retries=0)
    with pytest.raises(errors.GradientError) as caught:
        await call(client.complete("m", "p"))
    assert type(caught.value).__name__ == name
    assert isinstance(caught.value, getattr(errors, name))
