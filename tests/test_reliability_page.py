"""docs/reliability.md names, for each failure mode, the test that shows it: every test it names exists."""

from __future__ import annotations

import ast
import re

from helpers import ROOT

PAGE = ROOT / "docs" / "reliability.md"
# `tests/x.py`, `tests/x.py::test_a`, and `::test_b` after it (the same file)
NAMED = re.compile(r"`(tests/[\w/]+\.py)?(?:::(\w+))?`")


def test_every_test_the_reliability_page_names_exists() -> None:
    named: list[tuple[str, str | None]] = []
    for line in PAGE.read_text().splitlines():
        if not line.startswith("|"):
            continue
        path = None
        for file, test in NAMED.findall(line.rsplit("|", 2)[-2]):  # the row's last column
            path = file or path
            assert path is not None, f"{line!r}: a test named before its file"
            named.append((path, test or None))
    assert named, "the page names no test"
    for path, test in named:
        source = ROOT / path
        assert source.is_file(), f"docs/reliability.md names {path}, which does not exist"
        if test is not None:
            functions = {
                node.name
                for node in ast.walk(ast.parse(source.read_text()))
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            assert test in functions, f"docs/reliability.md names {path}::{test}, which does not exist"
