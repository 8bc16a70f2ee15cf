"""The package as users install it, with the commands docs/index.md gives: the wheel of ``make dist``,
and a clone, each in a fresh venv with only the ``sandbox`` extra.

Marked ``dist`` and left out of a plain ``pytest`` run (a fresh venv costs half a minute): ``.ci/run``
runs ``make dist`` and then ``pytest -m dist tests/test_dist.py``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from helpers import installed_top_level, tracked_copy

pytestmark = pytest.mark.dist

ROOT = Path(__file__).resolve().parent.parent


def _tested_pythons() -> list[str]:
    """``PYTHONS`` of noxfile.py: the versions the suite runs on, which the classifiers must name."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PYTHONS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py has no PYTHONS")


SCRIPT = """
import wrapper
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale

with Sandbox(seed=0) as sb, Scale(api_key="k", base_url=sb.scale_base_url) as scale:
    r = scale.complete("llama-3-8b-instruct", "Alice was", max_tokens=4)
    print("complete", r.finish_reason, r.response_tokens)
    chunks = list(scale.stream("llama-3-8b-instruct", "Alice was", max_tokens=4))
    print("stream", chunks[-1].finish_reason, chunks[-1].response_tokens, len(chunks) > 1)
print("from", wrapper.__file__)
"""


@pytest.fixture(scope="module")
def wheel() -> Path:
    wheels = sorted((ROOT / "dist").glob("completion_clients-*.whl"))
    assert len(wheels) == 1, f"expected the one wheel of `make dist` in dist/, found {wheels}"
    return wheels[0]


def _documented_install(source: str) -> str:
    """The install command of docs/index.md whose line names ``source``: the line readers copy."""
    page = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    [line] = [line for line in page.splitlines() if line.startswith("pip install ") and source in line]
    return line


def _fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    return where / "bin" / "python"


def _as_a_reader(command: str, python: Path, cwd: Path) -> None:
    """``command`` run by a shell in ``cwd``, the venv of ``python`` activated, as a reader runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(python.parent.parent)
    )
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def venv_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing but the wheel and its ``sandbox`` extra, installed by the command the docs
    give for the wheel, run where the wheel is (pip's cache makes it quick)."""
    command = _documented_install(".whl")
    assert wheel.name in command, f"docs/index.md installs another wheel than {wheel.name}: {command}"
    python = _fresh_venv(tmp_path_factory.mktemp("venv"))
    _as_a_reader(command, python, cwd=wheel.parent)
    return python


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_wheel_completes_and_streams_from_a_fresh_venv(venv_python: Path, tmp_path: Path) -> None:
    done = _run(venv_python, "-c", SCRIPT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "complete length 4"
    assert lines[1] == "stream length 4 True"
    assert lines[2].startswith(f"from {venv_python.parent.parent}"), (
        "imported from the checkout, not the wheel"
    )


def test_the_documented_install_from_a_clone_completes_and_streams(tmp_path: Path) -> None:
    """``pip install './completion-clients[sandbox]'`` as docs/index.md gives it, beside a clone: the
    checkout's tracked files, as ``git clone`` would give them."""
    tracked_copy(tmp_path / "completion-clients")
    python = _fresh_venv(tmp_path / "venv")
    _as_a_reader(_documented_install("./completion-clients["), python, cwd=tmp_path)
    done = _run(python, "-c", SCRIPT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["complete length 4", "stream length 4 True"]
    assert lines[2].startswith(f"from {python.parent.parent}"), "imported from elsewhere than the venv"


def test_a_folder_with_its_own_generated_package_does_not_break_the_clients(
    wheel: Path, venv_python: Path, tmp_path: Path
) -> None:
    """``generated`` is a common name for an application's own package; the wheel installs ``wrapper``
    only, with the generated code inside it, so neither shadows the other."""
    assert installed_top_level(wheel) == {"wrapper"}
    own = tmp_path / "generated"
    own.mkdir()
    (own / "__init__.py").write_text("")
    (own / "exceptions.py").write_text("class APIError(Exception):\n    pass\n")
    mine = "import generated.exceptions\nprint('mine', generated.exceptions.__file__)\n"
    done = _run(venv_python, "-c", SCRIPT + mine, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["complete length 4", "stream length 4 True"]
    assert lines[-1] == f"mine {own / 'exceptions.py'}"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    nothing = _run(venv_python, "-c", "import generated", cwd=elsewhere)
    assert "ModuleNotFoundError: No module named 'generated'" in nothing.stderr, nothing.stderr


def test_the_command_line_runs_from_the_wheel(venv_python: Path, tmp_path: Path) -> None:
    done = _run(venv_python, "-m", "wrapper", "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {"complete", "batch", "sandbox"} <= set(done.stdout.replace(",", " ").replace("{", " ").split())
    script = _run(venv_python.parent / "completion-clients", "--help", cwd=tmp_path)
    assert script.returncode == 0, script.stderr


def test_only_the_sandbox_extra_is_installed(venv_python: Path, tmp_path: Path) -> None:
    """The wheel's own dependencies and the extra's, not the dev tools or the other extras."""
    done = _run(venv_python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path)
    installed = {line.split("==")[0].lower() for line in done.stdout.splitlines()}
    assert {"completion-clients", "httpx", "starlette", "uvicorn"} <= installed
    assert not installed & {"ray", "opentelemetry-api", "pytest", "mypy", "httpx2"}  # httpx2: an extra


def test_the_metadata_names_licence_urls_and_versions(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in archive.namelist())
    assert metadata["License-Expression"] == "MIT"
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL", []))
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    classifiers = metadata.get_all("Classifier", [])
    versions = [
        c.rsplit(" ", 1)[-1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert versions == _tested_pythons()
    assert metadata["Requires-Python"] == ">=3.11"
