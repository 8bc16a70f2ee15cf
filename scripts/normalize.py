"""Normalise a vendor OpenAPI document before code generation.

The transform is pure and deterministic, and keyed on the shape of a document rather than on
today's file, so a later version of either vendor's spec goes through it unchanged:

* keys that are not OpenAPI are dropped (``_id``-style private keys, ``x-readme``);
* inline ``oneOf``/``anyOf`` object variants that carry a one-value ``enum`` tag property (the
  shape of Gradient's ``CompleteModelError``) become named component schemas, each named after
  its tag (``flaggedContent`` -> ``FlaggedContentError``), and the union gets a discriminator;
* nullable inline object properties become named schemas (``CompleteModelBodyParams.guidance`` ->
  ``CompleteModelBodyParamsGuidance``) instead of the generator's ``...GuidanceType0``;
* component schemas whose names are module paths
  (``egp_api_backend__server__..__Choice``) are renamed to their ``title``;
* defaults of request-body fields move into their descriptions: they are what the server assumes
  when a field is absent, and the generated model would otherwise send them on every request;
* operation ids become snake_case identifiers (``CompleteModel`` -> ``complete_model``); an id
  that is no identifier (``POST-V4-/models/{id}/completions``) is derived from the method and
  the last path segment (``create_completion``).
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
        if not (isinstance(schema, dict) and schema.get("nullable") and "properties" in schema):
            continue
        hoisted = pascal_case(name) + pascal_case(prop)
        if hoisted in schemas:
            continue
        schemas[hoisted] = {key: value for key, value in schema.items() if key != "nullable"}
        properties[prop] = {"allOf": [{"$ref": REF_PREFIX + hoisted}], "nullable": True}


def _variant_tag(variant: Any) -> tuple[str, str] | None:
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
        tags = [_variant_tag(variant) for variant in variants]
        props = {tag[0] for tag in tags if tag is not None}
        if None in tags or len(props) != 1:
            continue
        suffix = re.findall(r"[A-Z][a-z]*", name)[-1:] or [""]
        mapping: dict[str, str] = {}
        refs = []
        for tag in tags:
            assert tag is not None
            variant_name = pascal_case(tag[1])
            if not variant_name.endswith(suffix[0]):
                variant_name += suffix[0]
            if variant_name in schemas or variant_name in mapping.values():
                return  # a name clash: leave this union as the vendor wrote it
            mapping[tag[1]] = REF_PREFIX + variant_name
            refs.append({"$ref": REF_PREFIX + variant_name})
        for variant, ref in zip(variants, refs, strict=True):
            schemas[ref["$ref"].removeprefix(REF_PREFIX)] = variant
        schema[keyword] = refs
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
                note = f"Server default: {json.dumps(prop.pop('default'))}."
                prop["description"] = f"{prop['description']} {note}" if prop.get("description") else note
        pending.extend(schema.get("properties", {}).values())
        pending.extend(value for key in ("allOf", "anyOf", "oneOf") for value in schema.get(key, []))
        pending.extend(schema[key] for key in ("items", "additionalProperties") if key in schema)
