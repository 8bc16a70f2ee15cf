"""What the package knows of each API, in one descriptor per API: ``Api``.

Each API's public module (``wrapper.scale``, ``wrapper.gradient``) defines its ``API``; everything
else (the clients' core, the command line, Ray, telemetry, pacing, the pytest plugin, the sandbox)
reads descriptors and never branches on an API's name. ``NAMES`` lists the APIs; ``get(name)``
loads one.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import AsyncClient, SyncClient
    from .validate import Rule

__all__ = ["NAMES", "Api", "Credential", "get"]

NAMES = ("gradient", "scale")
"""Every API, by the name the command line, Ray and telemetry use (its public module's name)."""


@dataclasses.dataclass(frozen=True)
class Credential:
    """A constructor argument that identifies the caller, defaulting to an environment variable."""

    keyword: str
    env: str
    required: bool

    @property
    def flag(self) -> str:
        """The command line's flag for it (``--api-key``)."""
        return "--" + self.keyword.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Api:
    """One API's facts."""

    name: str
    """Its name on the command line, in ``wrapper.ray`` and as telemetry's ``gen_ai.provider.name``."""
    credentials: tuple[Credential, ...]
    base_url_env: str
    default_base_url: str
    sandbox_path: str
    """Where the sandbox serves it, after the sandbox's own URL (Gradient's base URL ends in ``/api``)."""
    max_tokens: str
    """The keyword argument that caps the generated tokens."""
    stop: str | None
    """The keyword argument of stop sequences (None: the API has none)."""
    choices: str | None
    """The keyword argument of the choices the output must be one of (None: the API has none)."""
    streams: bool
    """Whether the API streams tokens (Gradient's does not: ``stream`` yields one chunk)."""
    log_env: str
    """The environment variable that switches the client's logging on (``info`` or ``debug``)."""
    model_help: str
    """What the command line says the model argument is."""

    def clients(self) -> tuple[Callable[..., SyncClient], Callable[..., AsyncClient]]:
        """The sync and async client classes (their keyword arguments are the API's own)."""
        module = importlib.import_module(f"wrapper.{self.name}")
        classes: tuple[Callable[..., SyncClient], Callable[..., AsyncClient]] = module.CLIENTS
        return classes

    def rules(self) -> Mapping[str, Rule]:
        """The checks ``complete`` makes of each keyword argument, from the spec."""
        rules: Mapping[str, Rule] = importlib.import_module(f"wrapper._core.wires.{self.name}").RULES
        return rules

    def client_options(self, environ: Any) -> dict[str, str]:
        """The constructor arguments set in ``environ`` (credentials and base URL), by keyword."""
        names = {credential.keyword: credential.env for credential in self.credentials}
        names["base_url"] = self.base_url_env
        return {keyword: environ[env] for keyword, env in names.items() if environ.get(env)}


def get(name: object) -> Api:
    """The descriptor of the API called ``name``; ``ValueError`` naming the APIs for any other."""
    if name not in NAMES:
        raise ValueError(f"api must be one of {', '.join(map(repr, NAMES))}; got {name!r}")
    api: Api = importlib.import_module(f"wrapper.{name}").API
    return api
