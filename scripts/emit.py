"""Emit what the wrapper restates from a spec: ``params.py`` (keywords and rules), ``exceptions.py``.

Both are read from the normalised spec and the override tables in ``scripts/overrides.py``. A
schema's constraints are emitted in one form whichever OpenAPI version wrote them: references
resolved, ``exclusiveMinimum``/``exclusiveMaximum`` as numbers (3.1), nullable forms folded into
``"nullable": True``, descriptions dropped, a field's server default kept as ``default``.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from normalize import HTTP_METHODS, REF_PREFIX, SERVER_DEFAULT, pascal_case, snake_case, variant_tag
from overrides import REQUEST_OPTIONS, Api

HEADER = "Written by scripts/regen.py from {spec} and scripts/overrides.py; never edited by hand."
COPIED = ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern")
PY_TYPES = {"integer": "int", "number": "float", "boolean": "bool", "string": "str"}


class EmitError(Exception):
    """The spec does not have what the override table says the wrapper needs."""


def operation(spec: dict[str, Any], operation_id: str) -> dict[str, Any]:
    """The operation with this (normalised) ``operationId``."""
    for item in spec.get("paths", {}).values():
        for method in HTTP_METHODS:
            op = item.get(method) if isinstance(item, dict) else None
            if isinstance(op, dict) and op.get("operationId") == operation_id:
                return op
    raise EmitError(f"no operation {operation_id!r} in the spec (scripts/overrides.py names it)")


def resolve(spec: dict[str, Any], schema: Any) -> Any:
    """``schema`` with its ``$ref`` followed (to a component schema)."""
    seen = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref in seen or not ref.startswith(REF_PREFIX):
            raise EmitError(f"cannot resolve {ref}")
        seen.add(ref)
        schema = spec["components"]["schemas"][ref.removeprefix(REF_PREFIX)]
    return schema


def body_schema(spec: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    """The JSON request body schema of an operation, resolved."""
    content = op.get("requestBody", {}).get("content", {})
    media = content.get("application/json") or next(iter(content.values()), None)
    if not isinstance(media, dict) or not isinstance(resolve(spec, media.get("schema")), dict):
        raise EmitError(f"operation {op.get('operationId')!r} has no JSON request body")
    schema: dict[str, Any] = resolve(spec, media["schema"])
    return schema


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("type") == "null" or schema.get("enum") == [None])


def constraints(spec: dict[str, Any], schema: Any, refs: tuple[str, ...] = ()) -> dict[str, Any]:
    """The checking rules a schema states, in the one form the wrapper reads (see the module docstring)."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str):
        if ref in refs:  # a recursive schema: its inner occurrences are not checked
            return {}
        return constraints(spec, resolve(spec, schema), (*refs, ref))
    if not isinstance(schema, dict):
        return {}
    out: dict[str, Any] = {}
    for part in schema.get("allOf", []):
        out.update(constraints(spec, part, refs))
    nullable = schema.get("nullable") is True or out.pop("nullable", False)
    kinds = schema.get("type")
    if isinstance(kinds, list):
        nullable = nullable or "null" in kinds
        kinds = [kind for kind in kinds if kind != "null"]
        if len(kinds) == 1:
            out["type"] = kinds[0]
        elif kinds:
            out["anyOf"] = [constraints(spec, {**schema, "type": kind}, refs) for kind in kinds]
    elif isinstance(kinds, str):
        out["type"] = kinds
    for keyword in ("anyOf", "oneOf"):
        variants = schema.get(keyword)
        if isinstance(variants, list):
            nullable = nullable or any(_is_null(variant) for variant in variants)
            rest = [constraints(spec, variant, refs) for variant in variants if not _is_null(variant)]
            if len(rest) == 1:
                out.update(rest[0])
                nullable = nullable or out.pop("nullable", False)
            elif rest:
                out["anyOf"] = rest
    if isinstance(schema.get("enum"), list):
        nullable = nullable or None in schema["enum"]
        out["enum"] = [value for value in schema["enum"] if value is not None]
    out.update({key: schema[key] for key in COPIED if key in schema})
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        value = schema.get(exclusive)
        if value is True and bound in out:  # 3.0: a flag on the bound
            out[exclusive] = out.pop(bound)
        elif isinstance(value, int | float) and not isinstance(value, bool):  # 3.1: the bound itself
            out[exclusive] = value
    if "items" in schema:
        out["items"] = constraints(spec, schema["items"], refs)
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {
            name: constraints(spec, prop, refs) for name, prop in sorted(schema["properties"].items())
        }
        out["required"] = sorted(schema.get("required", []))
    extra = schema.get("additionalProperties")
    if isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif isinstance(extra, dict):
        out["additionalProperties"] = constraints(spec, extra, refs) if extra else True
    if nullable:
        out["nullable"] = True
    return out


def keywords(spec: dict[str, Any], api: Api) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The prompt field and, per keyword argument: its wire name, constraints, description and reshape."""
    body = body_schema(spec, operation(spec, api.operation))
    properties = body.get("properties", {})
    missing = [name for name in (api.prompt, *api.hidden) if name not in properties]
    missing += [r.field for r in api.reshapes.values() if r.field not in properties]
    if missing:
        raise EmitError(f"the request body has no field {missing[0]!r} (scripts/overrides.py names it)")
    reshaped = {r.field: (keyword, r) for keyword, r in api.reshapes.items()}
    prompt = {"wire": api.prompt, "schema": constraints(spec, properties[api.prompt])}
    result: dict[str, dict[str, Any]] = {}
    for wire, schema in properties.items():
        if wire == api.prompt or wire in api.hidden:
            continue
        description = resolve(spec, schema).get("description") or schema.get("description", "")
        if wire in reshaped:
            keyword, reshape = reshaped[wire]
            outer = resolve(spec, schema)
            inner = resolve(spec, _non_null(spec, outer)).get("properties", {}).get(reshape.into)
            if inner is None:
                raise EmitError(f"the request field {wire!r} has no property {reshape.into!r}")
            description = resolve(spec, inner).get("description", "") or description
            result[keyword] = {
                "wire": wire,
                "schema": constraints(spec, inner),
                "description": description,
                "reshape": {"into": reshape.into, "constants": dict(reshape.constants)},
            }
        else:
            keyword = snake_case(wire)
            result[keyword] = {
                "wire": wire,
                "schema": _with_server_default(constraints(spec, schema), resolve(spec, schema)),
                "description": description,
                "reshape": None,
            }
    for keyword in sorted(set(result) & set(REQUEST_OPTIONS)):
        raise EmitError(
            f"the request field {result[keyword]['wire']!r} would be the keyword argument {keyword!r}, "
            "which the clients take as a request option; give it another keyword in scripts/overrides.py"
        )
    return prompt, dict(sorted(result.items()))


def _with_server_default(constraint: dict[str, Any], schema: Any) -> dict[str, Any]:
    """``constraint`` with the field's server default as ``default`` (a JSON Schema annotation), if any."""
    if isinstance(schema, dict) and SERVER_DEFAULT in schema:
        return {**constraint, "default": schema[SERVER_DEFAULT]}
    return constraint


def _non_null(spec: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The object schema inside a nullable wrapper (``allOf``/``anyOf``/``oneOf`` with null)."""
    if "properties" in schema:
        return schema
    for keyword in ("allOf", "anyOf", "oneOf"):
        for part in schema.get(keyword, []):
            if not _is_null(part) and "properties" in resolve(spec, part):
                return resolve(spec, part)
    return schema


# --- params.py -------------------------------------------------------------------------------------


def _escaped(text: str) -> str:
    """``text`` as it can stand between triple quotes."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _docstring(text: str) -> str:
    text = _escaped(text.strip())
    return f'"""{text}{" " if text.endswith(chr(34)) else ""}"""'


def _bounds(schema: dict[str, Any], name: str) -> list[str]:
    """The rules a constraint schema states, in words: ``0 <= temperature <= 2``, ``at most 4 items``."""
    low = "".join(
        f"{schema[k]} {op} " for k, op in (("minimum", "<="), ("exclusiveMinimum", "<")) if k in schema
    )
    high = "".join(
        f" {op} {schema[k]}" for k, op in (("maximum", "<="), ("exclusiveMaximum", "<")) if k in schema
    )
    words = [f"{low}{name}{high}"] if low or high else []
    for unit, least, most in (("character", "minLength", "maxLength"), ("item", "minItems", "maxItems")):
        if least in schema and most in schema:
            words.append(f"{schema[least]} to {schema[most]} {unit}s")
        elif least in schema or most in schema:
            count = schema.get(least, schema.get(most))
            words.append(f"{'at least' if least in schema else 'at most'} {count} {unit}{'s' * (count != 1)}")
    if "pattern" in schema:
        words.append(f"matching ``{schema['pattern']}``")
    if isinstance(schema.get("items"), dict) and (each := _bounds(schema["items"], "item")):
        words.append("each " + ", ".join(each))
    return words


def _keyword_doc(keyword: str, kind: str, schema: dict[str, Any], description: str) -> list[str]:
    """A keyword's item in the params class docstring, Markdown that reads as plain text too:
    ``- ``name`` (``type``): Bounds. Description``, the description's later blocks (a table) nested in it.
    """
    rules = ", ".join(_bounds(schema, keyword))
    rules = f"{rules[:1].upper()}{rules[1:]}." if rules else ""
    blocks = _blocks(description)
    first = " ".join(blocks.pop(0)[1]) if blocks and not blocks[0][0] else ""
    text = " ".join(part for part in (rules, first) if part)
    item = f"- ``{keyword}`` (``{kind}``)" + (f": {text}" if text else "")
    lines = textwrap.wrap(item, width=108, initial_indent=" " * 4, subsequent_indent=" " * 6)
    nested = " " * 8  # a list item's own blocks are indented by four
    for table, rows in blocks:
        lines.append("")
        if table:  # a Markdown table row: wrapping would break it
            lines += [nested + row for row in rows]
        else:
            lines += textwrap.wrap(" ".join(rows), width=108, initial_indent=nested, subsequent_indent=nested)
    if blocks:
        lines.append("")  # the next item after a blank line, not inside the last block
    return [_escaped(line) for line in lines]


def _blocks(text: str) -> list[tuple[bool, list[str]]]:
    """A description's Markdown blocks, each a table (its rows) or a paragraph (its lines)."""
    blocks: list[tuple[bool, list[str]]] = []
    previous = ""
    for line in (line.strip() for line in text.splitlines()):
        table = line.startswith("|")
        if line and previous and table == previous.startswith("|"):
            blocks[-1][1].append(line)
        elif line:
            blocks.append((table, [line]))
        previous = line
    return blocks


def _markdown(description: str) -> str:
    """A description whose tables render as tables: each set apart from the text by blank lines."""
    return "\n\n".join("\n".join(rows) if table else " ".join(rows) for table, rows in _blocks(description))


def _py_type(schema: dict[str, Any], hint: str, classes: list[str]) -> str:
    """The Python type of a constraint schema; nested objects with properties become TypedDicts."""
    if "anyOf" in schema:
        options = [_py_type(option, f"{hint}{i}", classes) for i, option in enumerate(schema["anyOf"], 1)]
        kind = " | ".join(dict.fromkeys(options))
    elif "enum" in schema:
        kind = f"Literal[{', '.join(repr(value) for value in schema['enum'])}]"
    elif schema.get("type") == "array":
        kind = f"Sequence[{_py_type(schema.get('items', {}), hint + 'Item', classes)}]"
    elif schema.get("type") == "object" or "properties" in schema:
        if schema.get("properties"):
            classes.append(_typed_dict(hint, schema, classes))
            kind = hint
        elif isinstance(schema.get("additionalProperties"), dict):
            kind = f"Mapping[str, {_py_type(schema['additionalProperties'], hint + 'Value', classes)}]"
        else:
            kind = "Mapping[str, object]"
    else:
        kind = PY_TYPES.get(schema.get("type", ""), "object")
    return f"{kind} | None" if schema.get("nullable") and kind != "object" else kind


def _typed_dict(name: str, schema: dict[str, Any], classes: list[str]) -> str:
    lines = [f"class {name}(TypedDict, total=False):", f'    """The ``{name}`` object of the spec."""', ""]
    for prop, sub in schema["properties"].items():
        kind = _py_type(sub, name + pascal_case(prop), classes)
        kind = f"Required[{kind}]" if prop in schema.get("required", []) else kind
        lines.append(f"    {prop}: {kind}")
    return "\n".join(lines) + "\n"


def params_module(api_name: str, spec_file: str, spec: dict[str, Any], api: Api) -> str:
    """The source of ``generated/<api>/params.py``."""
    prompt, keyword_data = keywords(spec, api)
    classes: list[str] = []
    fields = []
    entries = []
    for keyword, data in keyword_data.items():
        kind = _py_type({**data["schema"], "nullable": False}, pascal_case(keyword), classes)
        entries += _keyword_doc(keyword, kind, data["schema"], data["description"])
        fields.append(f"    {keyword}: {kind} | None")
        if data["description"]:
            fields.append(f"    {_docstring(_markdown(data['description']))}")
        fields.append("")
    body_name = api.operation
    doc = (
        f'"""The keyword arguments of {api_name}\'s ``{body_name}``: ``{api.params_class}``, their rules.\n\n'
        f"{HEADER.format(spec=spec_file)}\n"
        '"""'
    )
    params_doc = "\n".join(
        [
            f'    """The optional fields of ``{body_name}``\'s request body,'
            " as snake_case keyword arguments.",
            "",
            '    ``None`` means "not given": only the fields given are sent.',
            "",
            "    Keyword arguments:",
            "",
            *entries,
            '    """',
        ]
    )
    for data in keyword_data.values():
        data.pop("description")
    return "\n".join(
        [
            doc,
            "",
            "from __future__ import annotations",
            "",
            "from collections.abc import Mapping, Sequence",
            "from typing import Any, Literal, Required, TypedDict",
            "",
            f"__all__ = [{', '.join(repr(name) for name in ('KEYWORDS', 'PROMPT', api.params_class))}]",
            "",
            *classes,
            "",
            f"class {api.params_class}(TypedDict, total=False):",
            params_doc,
            "",
            *fields,
            "",
            "# The body field of the positional prompt, with its constraints.",
            f"PROMPT: dict[str, Any] = {prompt!r}",
            "",
            "# Per keyword argument: its body field, the constraints of its value, and how it is reshaped.",
            f"KEYWORDS: dict[str, dict[str, Any]] = {keyword_data!r}",
            "",
        ]
    )


# --- exceptions.py ---------------------------------------------------------------------------------


def error_variants(spec: dict[str, Any], api: Api) -> list[tuple[str, str, str, str, tuple[str, ...]]]:
    """``(tag, model, class, parent, statuses)`` for each tagged variant of the operation's error union;
    ``statuses`` are the keys of the responses whose body it may be (``"4XX"``, ``"404"``, ``"default"``)."""
    op = operation(spec, api.operation)
    variants: dict[str, tuple[str, str, str, str]] = {}
    statuses: dict[str, list[str]] = {}
    for status, response in sorted(op.get("responses", {}).items()):
        if str(status).startswith("2"):
            continue
        for media in resolve(spec, response).get("content", {}).values():
            union = resolve(spec, media.get("schema"))
            members = (union.get("oneOf") or union.get("anyOf") or []) if isinstance(union, dict) else []
            for member in members:
                tag = variant_tag(resolve(spec, member))
                if tag is None or "$ref" not in member:
                    continue  # untagged: no class, its body raises the status class
                if str(status) not in statuses.setdefault(tag[1], []):
                    statuses[tag[1]].append(str(status))
                if tag[1] in variants:
                    continue
                name = api.error_names.get(tag[1]) or re.sub(r"(?<!Error)$", "Error", pascal_case(tag[1]))
                parent = api.error_parents.get(tag[1]) or next(
                    (p for pattern, p in api.error_parent_patterns if re.search(pattern, tag[1])), None
                )
                model = member["$ref"].removeprefix(REF_PREFIX)
                variants[tag[1]] = (tag[1], model, name, parent or str(api.error_base))
    return [(*variant, tuple(statuses[tag])) for tag, variant in variants.items()]


def exceptions_module(spec_file: str, spec: dict[str, Any], api: Api, hand_written: set[str]) -> str:
    """The source of ``generated/<api>/exceptions.py``: one class per error tag and the tag table."""
    variants = error_variants(spec, api)
    generated = [v for v in variants if v[2] not in hand_written]
    imported = sorted({api.error_base or ""} | {v[2] for v in variants if v[2] in hand_written})
    imported = sorted(set(imported) | {v[3] for v in generated})
    lines = [
        f'"""One ``{api.error_base}`` subclass per ``type`` of the typed error bodies, and the tag table.',
        "",
        HEADER.format(spec=spec_file),
        "Its classes subclass the hand-written bases in ``generated/exceptions.py`` (copied from",
        "scripts/templates/exceptions.py); ``wrapper.errors`` re-exports both.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Callable, Mapping",
        "from typing import Any",
        "",
        f"from ..exceptions import {', '.join(imported)}",
        "from . import models",
        "",
        f"__all__ = [{', '.join(repr(v[2]) for v in sorted(generated, key=lambda v: v[2]))}]",
        "",
    ]
    for tag, model, name, parent, _ in generated:
        lines += [
            "",
            f"class {name}({parent}):",
            f'    """{api.error_docs.get(tag) or f"The API answered with a ``{tag}`` error body."}"""',
            "",
            f"    raw: models.{model}",
            "",
        ]
    table = ", ".join(
        f"{tag!r}: (models.{model}.from_dict, {name}, {statuses!r})"
        for tag, model, name, _, statuses in variants
    )
    lines += [
        "",
        "# Each typed error body by its ``type``: the generated model that parses it, the error it raises,",
        "# and the responses of the spec (their status keys: 4XX, 404, default) whose body it may be.",
        f"ERRORS: dict[str, tuple[Callable[[Mapping[str, Any]], Any], type[{api.error_base}], "
        f"tuple[str, ...]]] = {{{table}}}",
        "",
    ]
    return "\n".join(lines)
