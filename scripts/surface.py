"""The public surface of a generated client package, and what changed in it between two trees.

The surface is read from the generated source with ``ast`` (nothing is imported): operations
(modules under ``api/``) with their parameters, models with their fields and types, and the
values of every ``Literal`` enum. Comparing two surfaces yields the lines of the report that
``make regen`` prints, each marked as breaking callers or not.
"""

from __future__ import annotations

import ast
from pathlib import Path

Surface = dict[str, str]  # "kind name[.member]" -> "type/required description"


def read_surface(package: Path) -> Surface:
    """Describe the public surface of the generated package at ``package`` (empty if absent)."""
    surface: Surface = {}
    for path in sorted(package.glob("api/*/*.py")):
        if path.name != "__init__.py":
            _read_operation(path, surface)
    for path in sorted(package.glob("models/*.py")):
        if path.name != "__init__.py":
            _read_models(path, surface)
    return surface


def _read_operation(path: Path, surface: Surface) -> None:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "sync_detailed":
            surface[f"operation {path.stem}"] = ""
            args = node.args
            defaults = dict(zip(reversed(args.args), reversed(args.defaults), strict=False))
            defaults |= {a: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d}
            for arg in args.args + args.kwonlyargs:
                if arg.arg == "client":
                    continue
                required = "optional" if arg in defaults else "required"
                surface[f"parameter {path.stem}.{arg.arg}"] = f"{_annotation(arg)} {required}"


def _read_models(path: Path, surface: Surface) -> None:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            surface[f"model {node.name}"] = ""
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    name = stmt.target.id
                    if name == "additional_properties":
                        continue
                    required = "optional" if stmt.value is not None else "required"
                    surface[f"field {node.name}.{name}"] = f"{ast.unparse(stmt.annotation)} {required}"
        elif isinstance(node, ast.Assign) and (values := _literal_values(node.value)) is not None:
            enum = ast.unparse(node.targets[0])
            surface[f"enum {enum}"] = ""
            for value in values:
                surface[f"enum-value {enum}.{value}"] = ""


def _literal_values(node: ast.expr) -> list[object] | None:
    """The values of ``Literal["a", "b"]``: how the generator writes an enum (``literal_enums``)."""
    if not (isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal"):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [ast.literal_eval(item) for item in items]


def _annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation else "Any"


def _owner(key: str) -> str:
    """``field Model.name`` -> ``model Model``; ``parameter op.name`` -> ``operation op``."""
    kind, _, dotted = key.partition(" ")
    owner_kind = {"field": "model", "parameter": "operation", "enum-value": "enum"}.get(kind, kind)
    return f"{owner_kind} {dotted.split('.', 1)[0]}"


def diff_surfaces(old: Surface, new: Surface) -> list[str]:
    """Report lines for what ``new`` adds (``+``), removes (``-``) or changes (``~``) in ``old``.

    Lines that would break callers start with ``BREAKING``: anything removed, a changed type, a
    new required parameter or field of an existing operation or model, an optional one that became
    required. New operations, models, optional parameters or fields and enum values do not.
    """
    lines = []
    for key in sorted(old.keys() | new.keys()):
        if key not in new:
            breaking, line = True, f"- {key}"
        elif key not in old:
            breaking = new[key].endswith(" required") and _owner(key) in old
            line = f"+ {key}" + (f": {new[key]}" if new[key] else "")
        elif old[key] != new[key]:
            old_type, old_required = old[key].rsplit(" ", 1)
            new_type, new_required = new[key].rsplit(" ", 1)
            breaking = old_type != new_type or (old_required, new_required) == ("optional", "required")
            line = f"~ {key}: {old[key]} -> {new[key]}"
        else:
            continue
        lines.append(f"{'BREAKING' if breaking else '':8} {line}")
    return lines
