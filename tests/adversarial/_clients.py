"""Our clients as the suite builds them: its test credentials, any base URL, any options."""

from __future__ import annotations

from typing import Any

from wrapper.gradient import AsyncGradient, Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_KEY = "sgp-secret-key-5f1d0c9e7a"
GRADIENT_TOKEN = "gradient-secret-token-0b8e44a2"
ACCOUNT_ID = "acct-adversarial"
WORKSPACE_ID = "ws-adversarial"
SECRETS = (SCALE_KEY, GRADIENT_TOKEN)
MODELS = {"scale": "llama-3-8b-instruct", "gradient": "nous-hermes2"}
"""A model each API of the sandbox serves."""

_CREDENTIALS: dict[str, dict[str, str]] = {
    "scale": {"api_key": SCALE_KEY, "account_id": ACCOUNT_ID},
    "gradient": {"access_token": GRADIENT_TOKEN, "workspace_id": WORKSPACE_ID},
}
_CLASSES: dict[tuple[str, bool], Any] = {
    ("scale", False): Scale,
    ("scale", True): AsyncScale,
    ("gradient", False): Gradient,
    ("gradient", True): AsyncGradient,
}


def new_client(api: str, base_url: str, *, asynchronous: bool = False, **options: Any) -> Any:
    """A ``Scale`` or ``Gradient`` (their async twins if ``asynchronous``) with the test credentials."""
    return _CLASSES[api, asynchronous](**_CREDENTIALS[api], base_url=base_url, **options)


def sandbox_client(sb: Sandbox, api: str, *, asynchronous: bool = False, **options: Any) -> Any:
    """``new_client`` for the API ``api`` of the sandbox ``sb``."""
    url = sb.scale_base_url if api == "scale" else sb.gradient_base_url
    return new_client(api, url, asynchronous=asynchronous, **options)
