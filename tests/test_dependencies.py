"""The dependency floors docs/dependencies.md says advisories set are the ones pyproject.toml asks for."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

from helpers import ROOT
from packaging.requirements import Requirement
from packaging.version import Version

PAGE = ROOT / "docs" / "dependencies.md"
SECTION = "## Floors set by security advisories"


def advisory_floors() -> dict[str, tuple[Version, list[Version]]]:
    """Each row of the page's advisories table: package -> (its floor, the releases its advisories were
    fixed in)."""
    section = PAGE.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")][1:]
    return {
        package.split("(")[0].strip(): (
            Version(floor.strip()),
            [Version(v) for v in re.findall(r"\((\d[\d.]*)\)", fixes)],
        )
        for package, floor, fixes in rows
    }


def required() -> dict[str, Requirement]:
    """Every requirement of pyproject.toml, its own and its extras', by package name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = project["dependencies"] + [
        line for extra in project["optional-dependencies"].values() for line in extra
    ]
    return {(req := Requirement(line)).name: req for line in lines}


def test_each_floor_is_the_last_fix_of_its_advisories_and_pyproject_asks_for_it() -> None:
    floors = advisory_floors()
    assert set(floors) == {"aiohttp", "tqdm", "h11", "starlette", "redis"}
    requirements = required()
    for package, (floor, fixes) in floors.items():
        assert fixes, package
        assert max(fixes) == floor, package
        minimums = [
            Version(spec.version) for spec in requirements[package].specifier if spec.operator == ">="
        ]
        assert minimums == [floor], (
            f"pyproject.toml asks for {requirements[package]}, the page says >={floor}"
        )
        assert Version(importlib.metadata.version(package)) >= floor, f"{package} installed below its floor"
