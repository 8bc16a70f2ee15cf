"""The test suite on each supported Python: ``nox -s tests`` (all), ``nox -s tests-3.12`` (one).

Interpreters are looked up on ``PATH`` and in pyenv's versions (``$PYENV_ROOT/versions``, by default
``~/.pyenv/versions``), so a machine with pyenv's 3.12 and 3.13 installed needs no ``pyenv global``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYTHONS = ["3.11", "3.12", "3.13"]  # keep in step with the classifiers in pyproject.toml
REFERENCE = PYTHONS[0]
"""The version that runs everything (``.venv``'s, ``make test``'s, in CI); the others leave out
``SAME_ON_EVERY_PYTHON``."""

SAME_ON_EVERY_PYTHON = [
    # mypy with pyproject.toml's configuration, whose python_version = "3.11" fixes the version it checks
    # for: the same analysis whatever interpreter runs it. (tests/test_install.py runs mypy outside the
    # checkout, for the running interpreter's version: it stays.)
    "tests/test_docs_examples.py::test_examples_type_check",
    "tests/test_typing.py",
    # The regeneration pipeline's own tests, and vendor releases taken through it: generated/ is text
    # from the pinned generator and ruff, and `make check-regen` compares it byte for byte. The library
    # over the generated code, the same text on every version, runs on each in the rest of the suite.
    "tests/test_regen.py",
    "tests/test_spec_releases.py",
    # The docs site: mkdocs and mkdocstrings read the sources as text (griffe), not by importing them.
    "tests/test_docs_site.py",
]
"""What the other versions leave out. Not here, because they run (or can differ) per version: the
library and its tests, the sandbox, the CLI, Ray, the frameworks, the contract tests (the requests the
clients build), the install (mypy outside the checkout, for the running version), the docs' examples
(each runs in a fresh interpreter) and the bench's smoke test."""

HTTPX2_MOCKS = {"pytest-httpx2": "test_pytest_httpx2.py", "httpx2-pytest": "test_httpx2_pytest.py"}
"""The httpx2 mocking plugins, each with its tests in ``tests/httpx2_mocks/`` (and its examples in
docs/testing.md): both install the module ``pytest_httpx2`` with the fixture ``httpx2_mock``, so each
runs in an environment of its own (``httpx2_mocks``)."""

nox.options.default_venv_backend = "uv|venv"  # uv (a dev dependency) installs the dev extra in seconds
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = False  # .ci/run decides which versions must be there


def _pyenv_bins() -> list[str]:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    return [str(bin_dir) for bin_dir in sorted(root.glob("3.*/bin")) if bin_dir.is_dir()]


# pyenv's own interpreters first: its shims on PATH fail for any version that is not `pyenv global`.
os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """pytest with the dev extra, in make test's two parts (regen, ruff and mypy: the same on any version).

    Arguments after ``--`` replace the parts: ``nox -s tests-3.13 -- tests/test_batch.py``.
    """
    session.install("-e", ".[dev]")
    session.env["PYTHONDONTWRITEBYTECODE"] = ""  # as the Makefile's unexport: pytest's rewrites are cached
    # As `make install` does: a path entry for the checkout, so type checkers resolve the package too.
    pth = "pathlib.Path(sysconfig.get_path('purelib'), 'completion_clients_checkout.pth')"
    session.run("python", "-c", f"import pathlib, sysconfig; {pth}.write_text({str(Path.cwd()) + chr(10)!r})")
    if session.posargs:
        session.run("python", "-m", "pytest", "-q", *session.posargs)
        return
    left_out = [] if session.python == REFERENCE else [f"--deselect={test}" for test in SAME_ON_EVERY_PYTHON]
    # As the Makefile's SERIAL_PART (three at a time) and PARALLEL_PART: the serial tests among themselves,
    # then the rest.
    workers = str(2 * (os.cpu_count() or 1))  # the Makefile's WORKERS: two per CPU
    session.run("python", "-m", "pytest", "-q", "-n", "3", "-m", "serial and not dist", *left_out)
    session.run("python", "-m", "pytest", "-q", "-n", workers, "-m", "not serial and not dist", *left_out)


@nox.session(python=REFERENCE)
@nox.parametrize("plugin", list(HTTPX2_MOCKS))
def httpx2_mocks(session: nox.Session, plugin: str) -> None:
    """Users' httpx2 mocks see the clients' calls: the plugin's tests and docs/testing.md's examples for it,
    in a small environment (the package with its httpx2 and sandbox extras, pytest and the plugin).

    The project's pytest options name the suite's plugins, which are not here: ``-o addopts=`` drops
    them, and ``--confcutdir`` leaves out the suite's conftest.py.
    """
    session.install("-e", ".[sandbox,httpx2]", "pytest", "pytest-asyncio", "pytest-timeout", "sybil", plugin)
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-o",
        "addopts=",
        "--confcutdir=tests/httpx2_mocks",
        f"tests/httpx2_mocks/{HTTPX2_MOCKS[plugin]}",
        "tests/test_docs_examples.py::test_example_runs",
        env={"DOCS_EXAMPLES_PLUGIN": plugin, "PYTHONDONTWRITEBYTECODE": ""},
    )
