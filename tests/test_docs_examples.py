"""Every Python code block of README.md and docs/*.md runs as a reader would run it, against the sandbox.

Sybil finds the blocks. Each runs as a script of its own in a fresh process (so an example that
sets a global, an OpenTelemetry provider or ``set_testing``, leaves nothing behind): forked, for
a script, from a Python that has imported the clients and the sandbox once for the module
(``tests/preloaded_python.py``; importing them took most of a short example's CPU), in an empty
directory, with the environment the docs tell readers to set: ``SGP_*`` and ``GRADIENT_*`` pointing
at one sandbox (seed 0), reset before each block. Conventions of the pages:

- a fenced ``output`` block right after a Python block is what the block prints; it is compared
  as doctest does, ``...`` matching anything;
- a block defining top-level ``test_*`` functions is a test file of the reader's project: it runs
  with ``python -m pytest`` in a directory with no configuration (so no ``asyncio_mode = "auto"``)
  and only the plugins such a project has (pytest-asyncio, pytest-httpx, this package's), and every
  test must pass;
- a block that reads ``REDIS_URL`` gets a real ``redis-server`` there (``tests/redis_server.py``),
  started for the module on the first such block and emptied before each;
- a block whose first line is ``# Type-checked, not run: <why>`` needs what this machine lacks
  (an S3 bucket, a corporate CA); it is not run, and says so on the page;
- a block whose first line is ``# Needs <plugin> (run by nox -s <session>): <why>`` is a test file
  for a pytest plugin the suite's environment lacks (an httpx2 mocking plugin: the two install the
  same module): it runs in that nox session, which installs the plugin and names it in
  ``DOCS_EXAMPLES_PLUGIN``, and nowhere else.

Every block, run or not, is also type-checked with mypy.
"""

from __future__ import annotations

import ast
import doctest
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from preloaded_python import PreloadedPython
from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

from wrapper.sandbox import Sandbox

pytestmark = pytest.mark.long("parallel")  # 197-252 s of one process in make test

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
NOT_RUN = re.compile(r"# Type-checked, not run: (?P<why>\S.*)")
NEEDS = re.compile(r"# Needs (?P<plugin>[\w-]+) \(run by nox -s (?P<session>[\w-]+)\): (?P<why>\S.*)")
PLUGIN = os.environ.get("DOCS_EXAMPLES_PLUGIN")
"""The plugin the blocks run here need (set by a nox session), or None: the blocks that need none."""
# A reader's project has the plugins the testing page names, not the dev extra's (hypothesis, ...).
USER_PLUGINS = ["-p", "asyncio", "-p", "pytest_httpx", "-p", "completion_clients"]
RATE_LIMITED = re.compile(r"\bSandbox\([^)]*\b[rt]pm=")
TIMEOUT = 90  # seconds for one block; the slowest (a batch of a few hundred prompts) takes about 2


class Block(NamedTuple):
    """A Python block of a page, and the output the page shows for it (None: none shown)."""

    code: str
    output: str | None

    @property
    def not_run(self) -> str | None:
        """Why the block is not run, from its first line; None when it runs."""
        first = self.code.split("\n", 1)[0]
        match = NOT_RUN.fullmatch(first.strip())
        return match["why"] if match else None

    @property
    def needs(self) -> re.Match[str] | None:
        """The plugin the block needs and the nox session that installs it (``NEEDS``); None: none."""
        return NEEDS.fullmatch(self.code.split("\n", 1)[0].strip())

    @property
    def plugins(self) -> list[str]:
        """The pytest plugins its test file runs with: ``USER_PLUGINS``, the plugin it needs instead of
        pytest-httpx (whose module is ``pytest_httpx2`` for either httpx2 plugin)."""
        if self.needs is None:
            return USER_PLUGINS
        return [plugin.replace("pytest_httpx", "pytest_httpx2") for plugin in USER_PLUGINS]

    @property
    def meets_a_rate_limit(self) -> bool:
        """It starts a sandbox that enforces a rate: what it prints (the 429s met) depends on the pace the
        machine allows, so it runs in the serial part, with nothing beside it."""
        return RATE_LIMITED.search(self.code) is not None

    @property
    def is_test_file(self) -> bool:
        tree = ast.parse(self.code)
        return any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
            for node in tree.body
        )


_FENCED = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))


def _blocks(document: Document) -> Iterator[Region]:
    """One region per Python block, spanning the ``output`` block that follows it, if any."""
    fenced = list(_FENCED(document))
    for i, region in enumerate(fenced):
        if region.lexemes["info"].strip() != "python":
            continue
        end, output = region.end, None
        after = fenced[i + 1] if i + 1 < len(fenced) else None
        if (
            after is not None
            and after.lexemes["info"].strip() == "output"
            and not document.text[region.end : after.start].strip()
        ):
            end, output = after.end, str(after.lexemes["source"])
        yield Region(region.start, end, parsed=Block(str(region.lexemes["source"]), output))


def _examples() -> list[Example]:
    examples = []
    for page in PAGES:
        document = Document(page.read_text(encoding="utf-8"), str(page))
        for region in _blocks(document):
            document.add(region)
        examples.extend(document.examples())
    return examples


EXAMPLES = _examples()


def _name(example: Example) -> str:
    return f"{Path(example.path).relative_to(ROOT)}:{example.line}"


@pytest.fixture(scope="module")
def docs_sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture(scope="module")
def preloaded(docs_sandbox: Sandbox) -> Iterator[PreloadedPython]:
    """The Python the script blocks fork from, started with the environment every block gets."""
    python = PreloadedPython(_environment(docs_sandbox))
    yield python
    python.close()


def _environment(sandbox: Sandbox) -> dict[str, str]:
    """This process's environment, with the docs' variables pointed at ``sandbox`` instead of the reader's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGP_", "GRADIENT_", "OTEL_", "PYTEST_"))}
    env.update(
        sandbox.environ("sandbox"),
        PYTHONUNBUFFERED="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",  # only USER_PLUGINS
    )
    return env


RUN = [
    e
    for e in EXAMPLES
    if e.parsed.not_run is None and (e.parsed.needs and e.parsed.needs["plugin"]) == (PLUGIN or None)
]


@pytest.mark.parametrize(
    "example",
    [pytest.param(e, marks=pytest.mark.serial) if e.parsed.meets_a_rate_limit else e for e in RUN],
    ids=_name,
)
def test_example_runs(
    example: Example, docs_sandbox: Sandbox, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    block: Block = example.parsed
    docs_sandbox.reset()
    environment = _environment(docs_sandbox)
    if "REDIS_URL" in block.code:  # a Redis the reader runs: a real redis-server, emptied for the block
        environment["REDIS_URL"] = request.getfixturevalue("redis_url")
    script = tmp_path / ("test_example.py" if block.is_test_file else "example.py")
    script.write_text(block.code, encoding="utf-8")
    if block.is_test_file:  # pytest as the reader runs it: no module loaded ahead of its plugins
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *block.plugins,
            script.name,
        ]
        done = subprocess.run(
            command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=TIMEOUT
        )
    else:
        done = request.getfixturevalue("preloaded").run(script, environment, TIMEOUT)
    if done.returncode != 0:
        pytest.fail(f"{_name(example)} failed:\n{done.stdout}\n{done.stderr}", pytrace=False)
    if block.is_test_file:
        tests = sum(1 for line in block.code.splitlines() if re.match(r"(async )?def test_", line))
        assert re.search(rf"\b{tests} passed\b", done.stdout), done.stdout
        assert not re.search(r"\b(failed|skipped|error|xfailed)\b", done.stdout), done.stdout
    if block.output is not None:
        checker = doctest.OutputChecker()
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        if not checker.check_output(block.output, done.stdout, flags):
            shown = f"{_name(example)} printed:\n{done.stdout}\nbut the page shows:\n{block.output}"
            pytest.fail(shown, pytrace=False)


def test_every_page_has_run_examples() -> None:
    """The blocks were found: each guide with Python blocks contributes some that run."""
    pages = {Path(e.path).name for e in RUN}
    assert {"README.md", "clients.md", "batches.md", "sandbox.md", "testing.md"} <= pages, sorted(pages)


def test_blocks_not_run_say_why() -> None:
    """A block not run names what it needs, on its first line, where the reader sees it."""
    for example in EXAMPLES:
        why = example.parsed.not_run
        assert why is None or len(why) > 10, f"{_name(example)}: say what the block needs"


def test_blocks_for_a_plugin_run_in_a_nox_session_that_installs_it() -> None:
    """Each block that ``# Needs`` a plugin names the session of ``noxfile.py`` that installs it
    (``HTTPX2_MOCKS``), and each plugin it installs has its blocks."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    installed = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "HTTPX2_MOCKS"
    )
    needed = {example.parsed.needs["plugin"] for example in EXAMPLES if example.parsed.needs}
    assert needed == set(installed)
    for example in EXAMPLES:
        if example.parsed.needs:
            assert example.parsed.needs["session"] == "httpx2_mocks", _name(example)


# Examples stay short: untyped test functions and helpers are fine, but their bodies are checked.
RELAXED = "# mypy: disallow-untyped-defs=False, disallow-incomplete-defs=False, warn-return-any=False\n"


def test_examples_type_check(tmp_path: Path) -> None:
    """Every block, run or not, passes mypy: a renamed argument or method fails here too.

    mypy runs with the project's own configuration and cache (``.mypy_cache/``, kept between runs):
    ``make lint``'s mypy, on the same options, has analysed the library and its dependencies there,
    often by the time this runs beside it in ``make test`` (mypy replaces each cache file whole, so two
    runs at once at worst redo each other's work). Each example file only relaxes the rules on
    annotating its own functions.
    """
    names = {}
    for i, example in enumerate(EXAMPLES):
        path = tmp_path / f"example_{i}.py"
        path.write_text(RELAXED + example.parsed.code, encoding="utf-8")
        names[path.name] = example
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", *sorted(str(tmp_path / name) for name in names)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    def page_line(match: re.Match[str]) -> str:  # example_3.py:5 -> docs/page.md:47, the page's line
        example = names[match["file"]]
        return f"{Path(example.path).relative_to(ROOT)}:{example.line + int(match['line']) - 1}"

    report = re.sub(r"\S*(?P<file>example_\d+\.py):(?P<line>\d+)", page_line, done.stdout)
    assert done.returncode == 0, report


def test_the_readme_stays_a_landing_page() -> None:
    """Short, with the two set-up commands and the links into the site; the details live in docs/."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150
    assert "make demo" in readme
    assert "make test" in readme
    assert "## Frameworks" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), f"README links to {link}, which does not exist"
