"""The package's layers, as its imports show them: a core (``wrapper/_core/``, with the public modules
that name its parts) and the extras above it, each in its own folder or module, using the core through
its public names only; and no import circle anywhere.

Imports are read from the source (every ``import``, at module level, in a function or under
``TYPE_CHECKING``, and ``importlib.import_module`` of a literal name or an f-string, which reaches
every module its pattern matches), as ``tests/test_regen.py`` reads ``generated/``'s.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import wrapper
from wrapper import apis

PACKAGE = Path(wrapper.__file__).parent
CORE = ("wrapper._core", "wrapper._generated", "wrapper.apis", "wrapper.errors", "wrapper.testing")
"""What the core is made of: its folder, the generated code, and the public modules that are its API
descriptors, its errors and its testing switch."""
EXTRAS = {
    "pacing": ("wrapper.pacing",),
    "batch": ("wrapper.batch",),
    "cache": ("wrapper.cache",),
    "router": ("wrapper.router",),
    "command line": ("wrapper._cli", "wrapper.__main__"),
    "sandbox": ("wrapper.sandbox",),
    "Ray": ("wrapper.ray",),
    "telemetry": ("wrapper._telemetry",),
    "frameworks": ("wrapper.langchain", "wrapper.llama_index", "wrapper.frameworks"),
    "pytest plugin": ("wrapper.pytest_plugin",),
}
"""Each extra and the modules (or folders) that are its own."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    """Every hand-written module of the package, by name (the generated code left out)."""
    return {
        module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if "_generated" not in path.relative_to(PACKAGE).parts
    }


def within(name: str, homes: tuple[str, ...]) -> bool:
    return any(name == home or name.startswith(home + ".") for home in homes)


def imports(path: Path, name: str) -> Iterator[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` for each import in ``path`` (module ``name``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                yield base, alias.name, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
        ):
            literal = node.args[0]
            text = literal.value if isinstance(literal, ast.Constant) else _pattern(literal, package)
            if text is not None:
                yield str(text), None, node.lineno


ANY = "(?:"
"""What starts a module name that is a pattern (an f-string's), not a name."""


def _pattern(text: ast.JoinedStr, package: str) -> str | None:
    """An f-string's module names as a pattern (``f"wrapper._core.wires.{name}"``: the module of each
    API's name, ``wrapper._core.wires.scale`` and ``wrapper._core.wires.gradient``: the package imports by
    no other name), for ``targets`` to match against the package's modules; None for one that does not
    start in the package (``{__package__}`` is the module's own package)."""
    parts = []
    for value in text.values:
        if isinstance(value, ast.Constant):
            parts.append(re.escape(str(value.value)))
        elif isinstance(value, ast.FormattedValue) and getattr(value.value, "id", None) == "__package__":
            parts.append(re.escape(package))
        else:
            parts.append(f"(?:{'|'.join(map(re.escape, apis.NAMES))})")
    pattern = "".join(parts)
    return ANY + pattern + ")" if pattern.startswith("wrapper") else None


def targets(module: str, name: str | None, known: dict[str, Path]) -> list[str]:
    """The package's modules an import reaches (``from wrapper import X``: where the root says X is)."""
    if module.startswith(ANY):
        return [known_name for known_name in known if re.fullmatch(module, known_name)]
    if not module.startswith("wrapper"):
        return []
    if name is not None:
        if f"{module}.{name}" in known:
            return [f"{module}.{name}"]
        if module == "wrapper" and name in getattr(wrapper, "_LAZY", {}):
            return [wrapper._LAZY[name]]
    while module and module not in known and not module.startswith("wrapper._generated"):
        module = module.rpartition(".")[0]
    return [module] if module else []


def private(module: str, name: str | None) -> bool:
    parts = [*module.split("."), *([name] if name else [])]
    return any(part.startswith("_") and not part.startswith("__") for part in parts)


@pytest.mark.parametrize("extra", list(EXTRAS))
def test_an_extra_takes_only_public_names_from_outside_its_own_modules(extra: str) -> None:
    homes = EXTRAS[extra]
    taken = []
    for name, path in modules().items():
        if not within(name, homes):
            continue
        for module, imported, line in imports(path, name):
            full = f"{module}.{imported}" if imported else module
            if not module.startswith("wrapper") or within(module, homes) or within(full, homes):
                continue
            if private(module, imported):
                shown = f"{module}.{imported}" if imported else module
                taken.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {shown}")
    assert not taken, f"the {extra} takes private names from outside its own modules:\n" + "\n".join(taken)


def test_the_core_imports_no_extra_and_no_api_module() -> None:
    known = modules()
    reached = []
    for name, path in known.items():
        if not within(name, CORE):
            continue
        for module, imported, line in imports(path, name):
            for target in targets(module, imported, known):
                if target != "wrapper" and not within(target, CORE):
                    reached.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {target}")
    assert not reached, "the core imports what is built on it:\n" + "\n".join(reached)


def test_no_module_imports_itself_through_others() -> None:
    known = modules()
    graph = {
        name: {
            target
            for module, imported, _ in imports(path, name)
            for target in targets(module, imported, known)
            if target in known and target != name and target != "wrapper"
        }
        for name, path in known.items()
    }
    circles = _circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_an_import_by_importlib_that_closes_a_circle_is_seen(tmp_path: Path) -> None:
    """``importlib.import_module`` of an f-string reaches every module it can name: an API's descriptors
    that imported the API modules by name (which import the descriptors) would close a circle."""
    known = modules()
    source = tmp_path / "apis.py"
    source.write_text(
        'import importlib\n\ndef get(name):\n    return importlib.import_module(f"wrapper.{name}")\n'
    )
    reached = {
        target
        for module, imported, _ in imports(source, "wrapper.apis")
        for target in targets(module, imported, known)
    }
    assert {"wrapper.scale", "wrapper.gradient"} <= reached
    graph = {"wrapper.apis": reached, "wrapper.scale": {"wrapper.apis"}}
    graph.update({name: set() for name in reached if name not in graph})
    assert ["wrapper.apis", "wrapper.scale"] in _circles(graph)


def test_the_checks_see_a_private_import_and_a_circle() -> None:
    """The walk finds what it looks for: a private name, and a circle."""
    assert private("wrapper._core.validate", "check_params")
    assert private("wrapper", "_telemetry")
    assert not private("wrapper.apis", "Api")
    assert not private("wrapper", "__version__")
    assert _circles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
