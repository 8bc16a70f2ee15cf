"""Normalise a vendor OpenAPI document before code generation.

The transform is pure and deterministic, and keyed on the shape of a document rather than on
today's file, so a later version of either vendor's spec goes through it unchanged:

* keys that are not OpenAPI are dropped (``_id``-style private keys, ``x-readme``);
* inline ``oneOf``/``anyOf`` object variants that carry a one-value ``enum`` tag property (the
  shape of Gradient's ``CompleteModelError``) become named component schemas, each named after
  its tag (``flaggedContent`` -> ``FlaggedContentError``), and the union gets a discriminator;
  when some variants have no tag, those are named after their ``title`` (else
  ``<Union>Variant<N>``, N counting from 1) and the union gets no discriminator;
* nullable inline object and enum properties, in OpenAPI 3.0's form (``nullable: true``) or 3.1's
  (``anyOf``/``oneOf`` with ``{type: "null"}``, ``type: [X, "null"]``), become named schemas
  (``CompleteModelBodyParams.guidance`` -> ``CompleteModelBodyParamsGuidance``) instead of the
  generator's ``...GuidanceType0``;
* component schemas whose names are module paths
  (``egp_api_backend__server__..__Choice``) are renamed to their ``title``;
* defaults of request-body fields move into their descriptions and an ``x-server-default`` key:
  they are what the server assumes when a field is absent (the wrapper reads them there, the
  response cache to know whether a request samples), and the generated model would otherwise send
  them on every request;
* operation ids become snake_case identifiers (``CompleteModel`` -> ``complete_model``); an id
  that is no identifier (``POST-V4-/models/{id}/completions``) is derived from the method and
  the last path segment (``create_completion``).

A transform that cannot be done (a name that another schema already has) raises
``NormalizationError`` naming the schema's path and the reason.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

DROPPED_EXTENSIONS = frozenset({"x-readme"})
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
METHOD_VERBS = {"get": "get", "post": "create", "put": "update", "patch": "update", "delete": "delete"}
REF_PREFIX = "#/components/schemas/"
SERVER_DEFAULT = "x-server-default"
"""Where a request-body field's default goes: the value the server assumes when the field is absent."""
NAME_KEYS = ("title", "description", "default", "deprecated", "readOnly", "writeOnly", "example")


class NormalizationError(ValueError):
    """A spec shape the transform cannot name; the message starts with the schema's path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


def normalize(spec: dict[str, Any]) -> dict[str, Any]:
    """Return a normalised deep copy of ``spec``."""
    spec = _drop_private_keys(copy.deepcopy(spec))
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    _rename_module_path_schemas(spec, schemas)
    for name in list(schemas):
        _hoist_nullable_objects(name, schemas)
        _hoist_tagged_variants(name, schemas)
    _clean_operation_ids(spec)
    _move_request_defaults_to_descriptions(spec, schemas)
    return spec


def _drop_private_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _drop_private_keys(value)
            for key, value in node.items()
            if not key.startswith("_") and key not in DROPPED_EXTENSIONS
        }
    if isinstance(node, list):
        return [_drop_private_keys(item) for item in node]
    return node


def pascal_case(text: str) -> str:
    """``flaggedContent`` / ``flagged_content`` / ``Flagged content`` -> ``FlaggedContent``."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", text)
    return "".join(word[:1].upper() + word[1:] for word in words)


def snake_case(text: str) -> str:
    """``CompleteModel`` / ``completeModel`` -> ``complete_model``."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", text)
    return "_".join(word.lower() for word in words)


def _rename_module_path_schemas(spec: dict[str, Any], schemas: dict[str, Any]) -> None:
    renames: dict[str, str] = {}
    for name, schema in schemas.items():
        title = schema.get("title") if isinstance(schema, dict) else None
        if "__" in name and isinstance(title, str):
            new = pascal_case(title)
            if new and new not in schemas and new not in renames.values():
                renames[name] = new
    if not renames:
        return
    for old, new in renames.items():
        schemas[new] = schemas.pop(old)
    _rewrite_refs(spec, {REF_PREFIX + old: REF_PREFIX + new for old, new in renames.items()})


def _rewrite_refs(node: Any, mapping: dict[str, str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref in mapping:
            node["$ref"] = mapping[ref]
        for value in node.values():
            _rewrite_refs(value, mapping)
    elif isinstance(node, list):
        for item in node:
            _rewrite_refs(item, mapping)


def _hoist_nullable_objects(name: str, schemas: dict[str, Any]) -> None:
    properties = schemas[name].get("properties") if isinstance(schemas[name], dict) else None
    for prop, schema in (properties or {}).items():
        hoisted = pascal_case(name) + pascal_case(prop)
        path = f"{REF_PREFIX}{name}/properties/{prop}"
        inner = _nullable_inner(schema)
        if inner is None:
            continue
        if hoisted in schemas:
            raise NormalizationError(
                path, f"its nullable inline schema would be named {hoisted}, as another is"
            )
        schemas[hoisted] = inner
        ref = {"$ref": REF_PREFIX + hoisted}
        if schema.get("nullable"):  # 3.0
            properties[prop] = {"allOf": [ref], "nullable": True}
        else:  # 3.1
            outer = {key: schema[key] for key in NAME_KEYS if key in schema}
            properties[prop] = {**outer, "anyOf": [ref, {"type": "null"}]}


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema == {"type": "null"}


def _nullable_inner(schema: Any) -> dict[str, Any] | None:
    """The inline object or enum schema a nullable property wraps (3.0 or 3.1 form), if one needs a name.

    3.0 nullable enums are left alone: the generator names them after their property already.
    """
    if not isinstance(schema, dict):
        return None
    if schema.get("nullable") is True and "properties" in schema:
        return {key: value for key, value in schema.items() if key != "nullable"}
    kinds = schema.get("type")
    if isinstance(kinds, list) and "null" in kinds and len(kinds) == 2:
        kind = next(k for k in kinds if k != "null")
        inner = {key: value for key, value in schema.items() if key not in NAME_KEYS}
        inner["type"] = kind
        if isinstance(inner.get("enum"), list):
            inner["enum"] = [value for value in inner["enum"] if value is not None]
        return inner if "properties" in inner or "enum" in inner else None
    for keyword in ("anyOf", "oneOf"):
        variants = schema.get(keyword)
        if not isinstance(variants, list) or not any(_is_null(v) for v in variants):
            continue
        rest = [v for v in variants if not _is_null(v)]
        inline = len(rest) == 1 and isinstance(rest[0], dict) and "$ref" not in rest[0]
        if inline and ("properties" in rest[0] or "enum" in rest[0]):
            return dict(rest[0])
    return None


def variant_tag(variant: Any) -> tuple[str, str] | None:
    """The (property, value) pair that names an inline object variant, if it has exactly one."""
    if not isinstance(variant, dict) or "$ref" in variant or variant.get("type") != "object":
        return None
    tags = [
        (prop, schema["enum"][0])
        for prop, schema in variant.get("properties", {}).items()
        if isinstance(schema, dict)
        and isinstance(schema.get("enum"), list)
        and len(schema["enum"]) == 1
        and isinstance(schema["enum"][0], str)
        and prop in variant.get("required", [])
    ]
    return tags[0] if len(tags) == 1 else None


def _hoist_tagged_variants(name: str, schemas: dict[str, Any]) -> None:
    schema = schemas[name]
    if not isinstance(schema, dict):
        return
    for keyword in ("oneOf", "anyOf"):
        variants = schema.get(keyword)
        if not isinstance(variants, list) or not variants:
            continue
        tags = [variant_tag(variant) for variant in variants]
        props = {tag[0] for tag in tags if tag is not None}
        if len(props) != 1:
            continue  # no tags, or tags in different properties: left as the vendor wrote it
        suffix = (re.findall(r"[A-Z][a-z]*", name)[-1:] or [""])[0]
        mapping: dict[str, str] = {}
        taken = set(schemas)
        for index, (variant, tag) in enumerate(zip(variants, tags, strict=True)):
            path = f"{REF_PREFIX}{name}/{keyword}/{index}"
            if tag is not None:
                variant_name = pascal_case(tag[1])
                variant_name += "" if variant_name.endswith(suffix) else suffix
                if variant_name in taken:
                    reason = f"its tag {tag[1]!r} names it {variant_name}, as another schema is named"
                    raise NormalizationError(path, reason)
                mapping[tag[1]] = REF_PREFIX + variant_name
            elif isinstance(variant, dict) and "$ref" not in variant and variant.get("type") == "object":
                title = pascal_case(str(variant.get("title", "")))
                variant_name = title if title and title not in taken else f"{name}Variant{index + 1}"
                if variant_name in taken:
                    raise NormalizationError(path, f"its name {variant_name} is another schema's")
            else:
                continue  # a $ref or a scalar: named already, or needs no name
            taken.add(variant_name)
            schemas[variant_name] = variant
            variants[index] = {"$ref": REF_PREFIX + variant_name}
        if len(mapping) == len(variants):
            schema["discriminator"] = {"propertyName": props.pop(), "mapping": mapping}
        return


def _clean_operation_ids(spec: dict[str, Any]) -> None:
    for path, item in spec.get("paths", {}).items():
        for method in HTTP_METHODS:
            operation = item.get(method) if isinstance(item, dict) else None
            if not isinstance(operation, dict):
                continue
            current = operation.get("operationId", "")
            if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", current):
                operation["operationId"] = snake_case(current)
            else:
                operation["operationId"] = _operation_id_from_route(method, path)


def _operation_id_from_route(method: str, path: str) -> str:
    """``POST /v4/models/{id}/completions`` -> ``create_completion``; a GET on a collection lists."""
    segments = [seg for seg in path.split("/") if seg and not seg.startswith("{")]
    resource = snake_case(segments[-1]) if segments else "root"
    if method == "get" and not path.rstrip("/").endswith("}"):
        return f"list_{resource}"
    singular = re.sub(r"(?<!s)s$", "", resource)
    return f"{METHOD_VERBS.get(method, method)}_{singular}"


def _move_request_defaults_to_descriptions(spec: dict[str, Any], schemas: dict[str, Any]) -> None:
    pending = [
        media["schema"]
        for item in spec.get("paths", {}).values()
        for method in HTTP_METHODS
        for media in (item.get(method) or {}).get("requestBody", {}).get("content", {}).values()
        if isinstance(media, dict) and isinstance(media.get("schema"), dict)
    ]
    seen: set[int] = set()
    while pending:
        schema = pending.pop()
        if not isinstance(schema, dict) or id(schema) in seen:
            continue
        seen.add(id(schema))
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            pending.append(schemas.get(ref.removeprefix(REF_PREFIX)))
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict) and "default" in prop:
                prop[SERVER_DEFAULT] = prop.pop("default")
                note = f"Server default: {json.dumps(prop[SERVER_DEFAULT])}."
                prop["description"] = f"{prop['description']} {note}" if prop.get("description") else note
        pending.extend(schema.get("properties", {}).values())
        pending.extend(value for key in ("allOf", "anyOf", "oneOf") for value in schema.get(key, []))
        pending.extend(schema[key] for key in ("items", "additionalProperties") if key in schema)
