"""The test suite on each supported Python: ``nox -s tests`` (all), ``nox -s tests-3.12`` (one).

Interpreters are looked up on ``PATH`` and in pyenv's versions (``$PYENV_ROOT/versions``, by default
``~/.pyenv/versions``), so a machine with pyenv's 3.12 and 3.13 installed needs no ``pyenv global``.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

PYTHONS = ["3.11", "3.12", "3.13"]  # keep in step with the classifiers in pyproject.toml

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = False  # .ci/run decides which versions must be there


def _pyenv_bins() -> list[str]:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    return [str(bin_dir) for bin_dir in sorted(root.glob("3.*/bin")) if bin_dir.is_dir()]


# pyenv's own interpreters first: its shims on PATH fail for any version that is not `pyenv global`.
os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """pytest with the dev extra, as ``make test`` runs it (regen, ruff and mypy: the same on any version)."""
    session.install("-e", ".[dev]")
    # As `make install` does: a path entry for the checkout, so type checkers resolve the package too.
    pth = "pathlib.Path(sysconfig.get_path('purelib'), 'completion_clients_checkout.pth')"
    session.run("python", "-c", f"import pathlib, sysconfig; {pth}.write_text({str(Path.cwd()) + chr(10)!r})")
    session.run("python", "-m", "pytest", "-q", *session.posargs)
