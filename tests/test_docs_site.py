"""The documentation site as a reader sees it: built with ``mkdocs build --strict`` (as ``make docs``
does) into a temporary directory, its API reference pages read as HTML."""

from __future__ import annotations

import inspect
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from importlib import import_module
from pathlib import Path

import pytest
from emit import keywords
from helpers import ROOT, spec
from overrides import APIS

from wrapper import errors

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
HIDDEN = {"script", "style"}  # not shown to the reader


class Element:
    """An HTML element: its tag, attributes and children (elements and text)."""

    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs = tag, attrs
        self.children: list[Element | str] = []

    def text(self) -> str:
        """The text a reader sees in it."""
        if self.tag in HIDDEN:
            return ""
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)

    def iter(self, tag: str | None = None) -> Iterator[Element]:
        """This element and every element inside it (only those with ``tag``, if given), in document order."""
        if tag is None or self.tag == tag:
            yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter(tag)

    def find_id(self, id_: str) -> Element | None:
        return next((element for element in self.iter() if element.attrs.get("id") == id_), None)


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.open[-1].children.append(element)
        if tag not in VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.open) - 1, 0, -1):  # close up to the matching open element
            if self.open[depth].tag == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def _parse(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as ``make docs`` builds it (any warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    return out


def _reference(site: Path) -> dict[str, Element]:
    """Each API reference page by its name (``errors``, ``params``, ...), parsed."""
    pages = sorted((site / "reference").glob("*/index.html"))
    assert len(pages) == len(list((ROOT / "docs" / "reference").glob("*.md")))
    return {page.parent.name: _parse(page.read_text(encoding="utf-8")) for page in pages}


def test_the_errors_page_documents_every_name_of_wrapper_errors(site: Path) -> None:
    page = _reference(site)["errors"]
    missing = [name for name in errors.__all__ if page.find_id(f"wrapper.errors.{name}") is None]
    assert not missing, f"not on the wrapper.errors page: {missing}"


@pytest.mark.parametrize("api", list(APIS))
def test_the_keyword_reference_lists_each_keyword_as_an_item_and_its_tables_as_tables(
    site: Path, api: str
) -> None:
    page = _reference(site)["params"]
    _, described = keywords(spec(api), APIS[api])
    heading = page.find_id(f"wrapper._generated.{api}.params.{APIS[api].params_class}")
    assert heading is not None
    section = next(div for div in page.iter("div") if heading in div.children)  # the class and its docs
    items = list(section.iter("li"))
    assert [next(item.iter("code")).text() for item in items] == list(described)  # an item per keyword
    for item, (keyword, data) in zip(items, described.items(), strict=True):
        tables = [[th.text().strip() for th in table.iter("th")] for table in item.iter("table")]
        assert tables == _table_headers(data["description"]), keyword
    assert "| --- |" not in page.text()


def _table_headers(description: str) -> list[list[str]]:
    """The header cells of each Markdown table in a description: a row followed by a ``|---|`` row."""
    lines = [line.strip() for line in description.splitlines()]
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line, below in itertools.pairwise(lines)
        if line.startswith("|") and re.fullmatch(r"\|[\s:|-]+\|", below)
    ]


PRIVATE = re.compile(r"(?<![\w./-])_[A-Za-z]\w*")  # _Name, not dunders, snake_case words or /_paths


def test_no_reference_page_shows_a_private_name(site: Path) -> None:
    shown = {}
    for name, page in _reference(site).items():
        content = page.iter("article")  # the page's own content, not the navigation
        text = " ".join(article.text() for article in content)
        private = sorted(set(PRIVATE.findall(text)))
        for paragraph in page.iter("p"):
            if paragraph.text().strip().startswith("Bases: "):
                bases = [span.attrs.get("title") or "" for span in paragraph.iter() if "title" in span.attrs]
                private += [
                    path for path in bases if any(part.startswith("_") for part in path.split()[0].split("."))
                ]
        if private:
            shown[name] = private
    assert not shown


PUBLIC_MODULES = ("wrapper", "wrapper.errors", "wrapper.scale", "wrapper.gradient", "wrapper.apis",
                  "wrapper.batch", "wrapper.router", "wrapper.testing", "wrapper.sandbox")  # fmt: skip


def _target(path: str) -> object:
    """The object a cross-reference's path names (its longest importable module, then attributes); None
    for a name only a type checker sees."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        return found
    return None


def test_no_signature_names_a_private_class(site: Path) -> None:
    """Every class a signature shows (a parameter's, a return's or an attribute's type) is one a reader can
    import from a public module: a class only a private module holds is not in the reference. The
    generated models ``Completion.raw`` holds are the spec's, documented as such (``wrapper._generated``)."""
    public = {
        id(getattr(import_module(module), name))
        for module in PUBLIC_MODULES
        for name in import_module(module).__all__
    }
    shown: dict[str, set[str]] = {}
    for name, page in _reference(site).items():
        for signature in page.iter():
            if "doc-signature" not in (signature.attrs.get("class") or "").split():
                continue
            for element in signature.iter():
                path = re.match(r"[\w.]*", element.attrs.get("title") or "")[0]  # type: ignore[index]
                if not path.startswith("wrapper.") or path.startswith("wrapper._generated."):
                    continue
                target = _target(path)
                if inspect.isclass(target) and id(target) not in public:
                    shown.setdefault(name, set()).add(path)
    assert not shown
