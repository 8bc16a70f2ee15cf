"""The package as it is installed: what the wheel holds, ``make install``'s, which type checkers run from
outside the checkout resolve, and the install commands the pages give (tests/test_dist.py runs
docs/index.md's)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT, installed_top_level, tracked_copy

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def test_wrapper_generated_is_the_link_to_generated() -> None:
    """One generated tree in the checkout, under its installed name too: a copy in its place would go
    stale at the next ``make regen`` while the builds took generated/ (CONTRIBUTING.md)."""
    link = ROOT / "wrapper" / "_generated"
    fix = "wrapper/_generated must be the link to ../generated (on Windows: git clone -c core.symlinks=true)"
    assert link.is_symlink(), fix
    assert link.resolve() == (ROOT / "generated").resolve(), fix


@pytest.mark.parametrize("symlinks", [True, False], ids=["clone", "clone-without-symlinks"])
def test_the_wheel_installs_wrapper_alone_with_the_generated_code_inside(
    tmp_path: Path, symlinks: bool
) -> None:
    """Built from a clone as ``make dist`` builds it (the sdist, then the wheel from the sdist): one
    top-level package, ``wrapper``, so that no name of an application's clashes with the library's; the
    generated tree, every file of it, is ``wrapper/_generated/``, also from a clone whose link
    wrapper/_generated is a plain file (setup.py maps generated/ itself)."""
    clone = tracked_copy(tmp_path / "clone", symlinks=symlinks)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), str(clone)],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("*.whl")
    [sdist] = (tmp_path / "dist").glob("*.tar.gz")

    assert installed_top_level(wheel) == {"wrapper"}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [top_level] = [name for name in names if name.endswith(".dist-info/top_level.txt")]
        assert archive.read(top_level).decode().split() == ["wrapper"]
    generated = subprocess.run(
        ["git", "ls-files", "generated"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert generated
    assert {f"wrapper/_{name}" for name in generated} <= names
    with tarfile.open(sdist) as archive:  # files, not the checkout's link: the sdist builds anywhere
        assert not [member.name for member in archive.getmembers() if member.issym()]


def test_mypy_run_outside_the_checkout_sees_the_installed_package(tmp_path: Path, mypy_cache: Path) -> None:
    user_code = tmp_path / "use.py"
    user_code.write_text(
        'from wrapper.scale import Scale\n\nScale(api_key="k").complete("m", "p", max_tokns=5)\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(mypy_cache), user_code.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert not tmp_path.is_relative_to(ROOT)
    assert "Cannot find implementation or library stub" not in checked.stdout, checked.stdout
    assert (
        'use.py:3: error: Unexpected keyword argument "max_tokns" for "complete" of "Scale"' in checked.stdout
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr


def test_every_page_installs_the_package_from_a_clone_or_its_wheel() -> None:
    """No package index has the package: each page's install names a path (``./completion-clients[...]``
    or ``./completion_clients-VERSION-...whl[...]``, as docs/index.md does), with extras that exist."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wheel = f"completion_clients-{project['version']}-py3-none-any.whl"
    installs = []
    for page in PAGES:
        for line_number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for named in re.finditer(
                r"(?P<path>\S*)completion[-_]clients(?P<rest>[\w.-]*)\[(?P<extras>[^\]]*)\]", line
            ):
                where = f"{page.relative_to(ROOT)}:{line_number}: {named[0]}"
                installs.append(where)
                assert named["path"].endswith("./"), f"{where}: not a path, which no package index serves"
                assert named["rest"] in ("", wheel.removeprefix("completion_clients")), (
                    f"{where}: not {wheel}"
                )
                assert set(named["extras"].split(",")) <= set(project["optional-dependencies"]), where
    assert len(installs) >= 5, installs  # the README, docs/index.md's clone and wheel, the extras' pages
