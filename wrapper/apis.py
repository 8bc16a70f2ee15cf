"""The APIs this package speaks, and what it knows of each: their descriptors (``Api``).

Each API's module defines its descriptor, ``wrapper.scale.API`` and ``wrapper.gradient.API``: its
credentials and their environment variables, its default base URL, its max-tokens, stop and choice
keywords, whether it streams, its keyword arguments' rules and schemas. Code built on the clients
(the command line, the sandbox, Ray, the framework adapters, the pytest plugin, the router) reads
descriptors and never branches on an API's name, so a third API plugs in with a descriptor.

    from wrapper import apis

    for name in apis.NAMES:
        api = apis.get(name)
        print(name, api.max_tokens, [c.env for c in api.credentials])

This module imports no API's module, nor anything else built on it: ``get`` asks the package, which
sits above every API, for an API's module (``loader``, which ``wrapper.__init__`` sets).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from wrapper._core.hooks import HookFactory
    from wrapper._core.validate import Rule

__all__ = ["NAMES", "SPECS", "Api", "Credential", "get"]

SPECS = Path(str(getattr(importlib.util.find_spec("wrapper._generated"), "origin", ""))).parent
"""The folder of the normalised specs the clients are generated from: ``<api>/spec.json`` each."""
NAMES = ("gradient", "scale")
"""Every API, by the name the command line, Ray and telemetry use (its public module's name)."""

loader: Callable[[str], Any] | None = None
"""The public module of the API of that name, imported (set by the package, which sits above the APIs)."""


@dataclasses.dataclass(frozen=True)
class Credential:
    """A constructor argument that identifies the caller, defaulting to an environment variable."""

    keyword: str
    env: str
    required: bool = True

    @property
    def flag(self) -> str:
        """The command line's flag for it (``--api-key``)."""
        return "--" + self.keyword.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Api:
    """One API's facts; made once, in the API's module (``API``)."""

    name: str
    """Its name on the command line, in ``wrapper.ray`` and as telemetry's ``gen_ai.provider.name``."""
    max_tokens: str
    """The keyword argument that caps the generated tokens."""
    stop: str | None
    """The keyword argument of stop sequences (None: the API has none)."""
    choices: str | None
    """The keyword argument of the choices the output must be one of (None: the API has none)."""
    temperature: str | None
    """The keyword argument of the sampling temperature (None: the API has none, and is taken to sample)."""
    streams: bool
    """Whether the API streams tokens (Gradient's does not: ``stream`` yields one chunk)."""
    hooks: tuple[HookFactory, ...]
    """What every call of the API's clients gets, before its options' own (its module gives telemetry's)."""
    cache_hooks: HookFactory
    """What a call gets, after its options' hooks, when its options name a response cache (``cache``; its
    module gives ``wrapper.cache``'s): a call without one never runs the cache's code."""
    model_help: str
    """What the command line says the model argument is."""
    credentials: tuple[Credential, ...]
    base_url_env: str
    default_base_url: str
    log_env: str
    """The environment variable that switches the client's logging on (``info`` or ``debug``)."""
    clients: Callable[[], tuple[Callable[..., Any], Callable[..., Any]]] = dataclasses.field(
        compare=False, repr=False
    )
    """The sync and async client classes (their keyword arguments are the API's own)."""

    @property
    def sandbox_path(self) -> str:
        """Where the sandbox serves it, after the sandbox's own URL: its default base URL's path (Gradient's
        ends in ``/api``)."""
        return urlsplit(self.default_base_url).path.rstrip("/")

    def rules(self) -> Mapping[str, Rule]:
        """The checks ``complete`` makes of each keyword argument, from the spec."""
        return _rules(self.name)

    def check(self, params: Mapping[str, Any], prompt: str | None = None) -> None:
        """Check keyword arguments (and a prompt) as ``complete`` does before sending: ``ValueError`` naming
        the keyword and the rule the spec states, or text UTF-8 cannot encode (``TypeError`` for a keyword
        the API does not have)."""
        from wrapper._core.validate import check_encodable, check_params

        check_params(params, self.rules())
        check_encodable(params if prompt is None else {"prompt": prompt, **params})

    def schema(self, keyword: str) -> Mapping[str, Any]:
        """The spec's JSON schema of the keyword argument ``keyword`` (``KeyError`` for another name)."""
        schema: Mapping[str, Any] = _keywords(self.name)[keyword]["schema"]
        return schema

    def samples(self, body: Mapping[str, Any]) -> bool:
        """Whether a request with this JSON body (as sent) samples: its temperature is above 0, or, when it
        has none, the spec's server default is; True when neither says (the API's default is unknown)."""
        if self.temperature is None:
            return True
        data = _keywords(self.name)[self.temperature]
        value = body.get(data["wire"])
        if value is None:
            value = data["schema"].get("default")
        return value is None or value > 0

    def arguments_from(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The constructor arguments ``environ`` sets (credentials and base URL), by keyword."""
        names = {credential.keyword: credential.env for credential in self.credentials}
        names["base_url"] = self.base_url_env
        return {keyword: environ[env] for keyword, env in names.items() if environ.get(env)}


def _keywords(name: str) -> Mapping[str, Mapping[str, Any]]:
    """The keyword table ``make regen`` writes for the API ``name`` (``generated/<name>/params.py``)."""
    params = importlib.import_module(f"wrapper._generated.{name}.params")
    keywords: Mapping[str, Mapping[str, Any]] = params.KEYWORDS
    return keywords


@functools.cache
def _rules(name: str) -> Mapping[str, Rule]:
    from wrapper._core.validate import rules

    return rules(_keywords(name))


def get(name: object) -> Api:
    """The descriptor of the API called ``name``; ``ValueError`` naming the APIs for any other."""
    if name not in NAMES:
        raise ValueError(f"api must be one of {', '.join(map(repr, NAMES))}; got {name!r}")
    assert loader is not None  # importing this module imported the package, which set it
    api: Api = loader(name).API
    return api
