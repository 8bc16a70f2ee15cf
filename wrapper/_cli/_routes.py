"""``python -m wrapper batch routes ROUTES.json ...``: the routes of a JSON file, as a router's.

The file is a list of routes, each an object: ``api`` (``scale`` or ``gradient``) and ``model``, the
``Route`` options (``name``, ``requests_per_minute``, ``tokens_per_minute``, ``weight``, ``params``,
``limit_key``),
``base_url``, and the API's credentials: each given as it is (``"account_id": "eu"``) or read from the
environment variable another key names (``"api_key_env": "SGP_API_KEY_EU"``), else from the API's own
variable, as its client reads it. Secrets stay out of the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from wrapper import Route
from wrapper import apis as _api

__all__ = ["ROUTES_HELP", "load_routes"]

_OPTIONS = ("name", "requests_per_minute", "tokens_per_minute", "weight", "params", "limit_key")
ROUTES_HELP = (
    'a JSON list of routes, each {"api": "scale" or "gradient", "model": ..., and optionally "name", '
    '"requests_per_minute", "tokens_per_minute", "weight", "params", "limit_key" (its limit\'s name in '
    '--limit-store), "base_url", and credentials: '
    '"api_key": ... or "api_key_env": "VARIABLE" (each credential of the API, likewise; by default its '
    "own environment variable)}"
)


def load_routes(path: str, client_options: dict[str, Any]) -> list[Route]:
    """The routes of the file at ``path``, each an async client of its API with ``client_options`` (the
    command line's timeout and retries); ``ValueError`` naming the file, the route and what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the routes file ({exc.strerror})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list) or not data:
        raise ValueError(f'{path}: must hold a JSON list of routes, each {{"api": ..., "model": ...}}')
    return [_route(entry, f"{path}: route {number}", client_options) for number, entry in enumerate(data, 1)]


def _route(entry: object, where: str, client_options: dict[str, Any]) -> Route:
    if not isinstance(entry, dict):
        raise ValueError(
            f'{where}: must be an object such as {{"api": "scale", "model": ...}}; got {entry!r}'
        )
    try:
        api = _api.get(entry.get("api"))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    keywords = [credential.keyword for credential in api.credentials]
    known = {"api", "model", "base_url", *_OPTIONS, *keywords, *(f"{keyword}_env" for keyword in keywords)}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r}; a {api.name} route's keys are {', '.join(sorted(known))}"
        )
    if "model" not in entry:
        raise ValueError(f'{where}: needs a "model" (the model its client is called with)')
    options = {**client_options, **({"base_url": entry["base_url"]} if "base_url" in entry else {})}
    for keyword in keywords:
        variable = entry.get(f"{keyword}_env")
        if variable is not None:
            value = os.environ.get(str(variable))
            if not value:
                raise ValueError(f"{where}: {keyword}_env names {variable}, which is not set")
            options[keyword] = value
        elif keyword in entry:
            options[keyword] = entry[keyword]
    try:
        client = api.clients()[1](**options)
        return Route(client, entry["model"], **{key: entry[key] for key in _OPTIONS if key in entry})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
