"""The key of a cached completion: a digest of everything that can change the answer.

It covers the API, the base URL (the deployment's identity; credentials are headers, never part of
it), the model, the request's URL (query included) and its whole JSON body as sent (every keyword
argument, ``extra_body`` included, in canonical JSON), so a parameter a later spec adds is in the key
with no change here. A request that samples (``Api.samples``: temperature above 0, or the spec's
server default when it has none) also carries a sample index, so ``n`` identical sampled requests
are ``n`` keys. ``FORMAT`` changes when what a key covers or an entry holds does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wrapper.apis import Api

__all__ = ["FORMAT", "request_key"]

FORMAT = 1
_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode  # made once: ``json.dumps`` with options makes an encoder at every call


def request_key(
    api: Api, base_url: str, model: str, url: str, body: Mapping[str, Any], sample: int = 0
) -> str:
    """The key of a request: a SHA-256 in hex of the canonical JSON of what it sends (``sample`` counts
    only when the request samples)."""
    document: dict[str, Any] = {
        "format": FORMAT,
        "api": api.name,
        "base_url": base_url,
        "model": model,
        "url": url,
        "body": body,
    }
    if api.samples(body):
        document["sample"] = sample
    return hashlib.sha256(_canonical(document).encode()).hexdigest()
