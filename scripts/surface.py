"""The public surface of a generated client package, and what changed in it between two trees.

The surface is read from the generated source with ``ast`` (nothing is imported): operations
(modules under ``api/``) with their parameters, models with their fields and types, the values
of every ``Literal`` enum; from ``spec.json`` each schema's constraints (bounds, lengths, item
counts, patterns); and the wrapper's resulting keyword arguments (``params.py``) and error
variants with their exception classes (``exceptions.py``). Comparing two surfaces yields the lines
of the report that ``make regen`` prints, each marked as breaking callers or not.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from normalize import snake_case

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
    if (package / "spec.json").is_file():
        schemas = json.loads((package / "spec.json").read_text()).get("components", {}).get("schemas", {})
        for name, schema in sorted(schemas.items()):
            _read_constraints(name, schema, surface)
    if (package / "params.py").is_file():
        _read_keywords(package / "params.py", surface)
    if (package / "exceptions.py").is_file():
        _read_exceptions(package / "exceptions.py", surface)
    return surface


# Tightening these breaks callers: a higher lower bound, a lower upper bound.
LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems")
UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems")


def _read_constraints(where: str, schema: Any, surface: Surface) -> None:
    """``constraint Schema.field.maximum`` -> ``2``, through properties and array items (3.0 exclusive
    flags read as 3.1 numbers)."""
    if not isinstance(schema, dict):
        return
    for key in (*LOWER, *UPPER, "pattern"):
        value = schema.get(key)
        if value is None or isinstance(value, bool):
            continue
        if key in ("minimum", "maximum") and schema.get("exclusive" + key.title()) is True:
            key = "exclusive" + key.title()
        surface[f"constraint {where}.{key}"] = json.dumps(value)
    for prop, sub in (schema.get("properties") or {}).items():
        _read_constraints(f"{where}.{prop}", sub, surface)
    if isinstance(schema.get("items"), dict):
        _read_constraints(f"{where}[]", schema["items"], surface)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(keyword, []):
            _read_constraints(where, part, surface)


def _read_keywords(path: Path, surface: Surface) -> None:
    """``keyword ScaleParams.top_p`` -> its type, from the generated TypedDict the client takes."""
    tree = ast.parse(path.read_text())
    exported = next(
        (
            ast.literal_eval(n.value)
            for n in tree.body
            if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__"
        ),
        [],
    )
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in exported:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    surface[f"keyword {node.name}.{stmt.target.id}"] = (
                        f"{ast.unparse(stmt.annotation)} optional"
                    )


def _read_exceptions(path: Path, surface: Surface) -> None:
    """``error-variant flaggedContent`` -> its class; ``exception Name`` -> its base, for generated ones."""
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            surface[f"exception {node.name}"] = f"{ast.unparse(node.bases[0])} class"
        elif isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "ERRORS":
            assert isinstance(node.value, ast.Dict)
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                assert isinstance(key, ast.Constant)
                assert isinstance(value, ast.Tuple)
                surface[f"error-variant {key.value}"] = f"{ast.unparse(value.elts[1])} class"


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


def _constraint_change(key: str, old: str | None, new: str | None) -> bool:
    """Whether a constraint change breaks callers: a new bound or a tighter one (removing one does not)."""
    if new is None:
        return False
    if old is None:
        return True
    side = key.rsplit(".", 1)[1]
    old_value, new_value = json.loads(old), json.loads(new)
    if side in LOWER:
        return bool(new_value > old_value)
    if side in UPPER:
        return bool(new_value < old_value)
    return True  # a changed pattern


def _constrained_existed(key: str, old: Surface) -> bool:
    """Whether the field (or model) a constraint key is on was in ``old``: a new one breaks no caller."""
    where = key.removeprefix("constraint ").rsplit(".", 1)[0]  # Schema.field[].sub without .maximum
    schema, _, rest = where.partition(".")
    field = re.split(r"[.\[]", rest, maxsplit=1)[0]
    if not field:
        return f"model {schema}" in old
    # Constraints name the spec's property (``maxGeneratedTokenCount``), fields the generated attribute.
    return f"field {schema}.{field}" in old or f"field {schema}.{snake_case(field)}" in old


def diff_surfaces(old: Surface, new: Surface) -> list[str]:
    """Report lines for what ``new`` adds (``+``), removes (``-``) or changes (``~``) in ``old``.

    Lines that would break callers start with ``BREAKING``: anything removed, a changed type, a
    new required parameter or field of an existing operation or model, an optional one that became
    required, a new or tightened constraint on an existing field. New operations, models, optional
    parameters or fields (with their constraints), keyword arguments, error variants, enum values and
    loosened or removed constraints do not.
    """
    lines = []
    for key in sorted(old.keys() | new.keys()):
        if key.startswith("constraint ") and old.get(key) != new.get(key):
            breaking = _constraint_change(key, old.get(key), new.get(key)) and _constrained_existed(key, old)
            sign = "+" if key not in old else "-" if key not in new else "~"
            line = f"{sign} {key}: {old.get(key, '(none)')} -> {new.get(key, '(none)')}"
        elif key not in new:
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
