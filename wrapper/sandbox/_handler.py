"""What the sandbox's app asks of each API it serves: a ``Handler`` (``_registry`` finds them by API name).

The app runs every vendor request through the same steps (fault, credential, body, rate limits, model)
and asks the request's handler only for what differs: where the credential travels, the shape of an
error, its defaults, its catalog, and how it answers. Each API's handler is ``HANDLER`` in
``wrapper.sandbox._<name>``, for each of ``wrapper.apis.NAMES``.
"""

from __future__ import annotations

import random
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from wrapper import apis as _api

from ._catalog import Model
from ._lm import LanguageModel, Sampling
from ._validate import Operation

FAULT_HEADER = "x-sandbox-fault"


@dataclass(frozen=True)
class Call:
    """One request admitted past the checks and the rate limits, as its handler's ``complete`` gets it."""

    model_id: str
    model: Model
    lm: LanguageModel
    body: dict[str, Any]
    """The validated request body, null fields dropped."""
    stream: bool
    settle: Callable[[int], None]
    """Call it with the tokens used (prompt and generated) once they are known."""
    rng: random.Random


class Handler:
    """One API as the sandbox serves it: subclasses set the attributes and write the hooks."""

    name: str
    """Its descriptor's name (one of ``wrapper.apis.NAMES``)."""
    title: str
    """How the help text and the banner name it."""
    operation: Operation
    """The spec operation it serves: its route and the schema its bodies are validated against."""
    models: tuple[Model, ...]
    """Its catalog; the first one serves unknown ids with ``any_model``."""
    models_label: str
    """What the help text calls its models."""
    headers_help: str
    """The headers a request sends, as the help text shows them."""
    default_max_tokens: int
    """The max tokens of a request that sets none (for the rate limiter too)."""
    prompt_field: str
    max_tokens_field: str
    """The body fields the rate limiter charges: the prompt's tokens and the max tokens."""
    credential_metavar: str
    credential_help: str
    """What the credential is, as the help text says it (``x-api-key``)."""
    credential_name: str
    """The credential, as its 401 names it (``the API key``)."""
    credential_how: str
    """How to send the credential, as the 401 of a request without one says it."""

    @cached_property
    def api(self) -> _api.Api:
        """Its descriptor."""
        return _api.get(self.name)

    @cached_property
    def checked(self) -> _api.Credential:
        """The credential the sandbox checks: its descriptor's first. Its keyword (and its flag) is also
        ``Sandbox``'s and ``serve``'s (the command line's) naming the one credential accepted."""
        return self.api.credentials[0]

    @cached_property
    def model_param(self) -> str:
        """The path parameter of the operation that holds the model id."""
        (param,) = re.findall(r"\{(\w+)\}", self.operation.path)
        return str(param)

    @cached_property
    def route(self) -> str:
        """Where the sandbox serves it: the descriptor's ``sandbox_path``, then the operation's path (its
        model id may hold any character, so that every id reaches the handler and gets the API's answer)."""
        return self.api.sandbox_path + self.operation.path.replace(
            f"{{{self.model_param}}}", f"{{{self.model_param}:anything}}"
        )

    def credential(self, request: Request) -> str:
        """The credential ``request`` sends ("" for none)."""
        raise NotImplementedError

    def wants_stream(self, raw: bytes) -> bool:
        """Whether the (not yet validated) body ``raw`` asks for a stream."""
        return False

    def check(self, request: Request, model_id: str) -> Response | None:
        """The error answer to a request its headers or path make invalid, or None."""
        return None

    def bad_fault_header(self, message: str, value: str) -> Response:
        """The error answer to an ``x-sandbox-fault`` header ``value`` that is not a fault."""
        raise NotImplementedError

    def status_error(self, status: int, message: str) -> Response:
        """An error answer of ``status`` in the API's shape (a 401, a 429, a 408 or 413 for a body, an
        injected status)."""
        raise NotImplementedError

    def invalid(self, errors: list[dict[str, Any]]) -> Response:
        """The error answer to a body that failed validation with pydantic-style ``errors``."""
        raise NotImplementedError

    def unknown_model(self, model_id: str) -> Response:
        """The error answer to a model id not in the catalog."""
        raise NotImplementedError

    def listing(self, model: Model) -> dict[str, Any]:
        """What ``GET /_sandbox/models`` says of ``model``."""
        return {"id": model.id, "context": model.context}

    def complete(self, call: Call) -> Response | AsyncGenerator[str, None]:
        """The answer to an admitted request: a response, or a stream's server-sent events."""
        raise NotImplementedError

    def help(self) -> str:
        """Its part of the help text: its base URL and headers, its models, its error triggers."""
        models = "\n".join(f"  {m.id:30} {m.description}" for m in self.models)
        return (
            f"{self.title} {self.models_label} (base URL http://HOST:PORT{self.api.sandbox_path}, "
            f"header {self.headers_help}):\n{models}\n{self.triggers_help()}"
        )

    def triggers_help(self) -> str:
        """The help text's lines on what makes the API answer an error."""
        raise NotImplementedError


def sampling(
    temperature: float | None,
    top_k: float | None,
    top_p: float | None,
    max_tokens: int,
    room: int,
    default_temperature: float,
    top_logprobs: int = 0,
    stop: tuple[str, ...] = (),
) -> Sampling:
    """The sampling a request asks for, within the ``room`` its model's context leaves."""
    return Sampling(
        max_tokens=max(0, min(int(max_tokens), room)),
        temperature=default_temperature if temperature is None else max(0.0, temperature),
        top_k=int(top_k or 0),
        top_p=1.0 if top_p is None else top_p,
        stop=stop,
        top_logprobs=max(1, min(int(top_logprobs), 20)) if top_logprobs else 0,
    )
