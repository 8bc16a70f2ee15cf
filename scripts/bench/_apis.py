"""The requests every row sends: one model, one prompt, the credentials, paths, headers and bodies.

The baselines send byte-for-byte the request the wrapper sends for the same call, so a row's ratio
is the wrapper's own cost.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ACCOUNT",
    "GRADIENT_BODY",
    "GRADIENT_HEADERS",
    "GRADIENT_PATH",
    "KEY",
    "MAX_TOKENS",
    "MODEL",
    "PROMPT",
    "SCALE_HEADERS",
    "SCALE_PATH",
    "WORKSPACE",
    "scale_body",
]

MODEL = "bench-model"
PROMPT = "What is the capital of France?"
MAX_TOKENS = 32
KEY = "bench-key"
ACCOUNT = "bench-account"
WORKSPACE = "bench-workspace"

SCALE_PATH = f"/v4/models/{MODEL}/completions"
SCALE_HEADERS = {"x-api-key": KEY, "x-selected-account-id": ACCOUNT}

GRADIENT_PATH = f"/api/models/{MODEL}/complete"  # the wrapper's base_url ends in /api, as the real one does
GRADIENT_HEADERS = {"authorization": f"Bearer {KEY}", "x-gradient-workspace-id": WORKSPACE}
GRADIENT_BODY = {"query": PROMPT, "maxGeneratedTokenCount": MAX_TOKENS}


def scale_body(*, stream: bool = False, max_tokens: int = MAX_TOKENS) -> dict[str, Any]:
    """Scale's request body, as ``Scale.complete``/``Scale.stream`` send it."""
    body: dict[str, Any] = {"prompt": PROMPT, "max_tokens": max_tokens}
    if stream:
        body["stream"] = True
    return body
