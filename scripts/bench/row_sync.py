"""Sync per-request cost: sequential ``Scale.complete``/``Gradient.complete`` vs a plain ``httpx.Client``.

The figure is the client process's CPU time per request (``time.process_time``), so the server's
work, in its own process, does not count; the baseline is the same POST plus ``response.json()``.
The wrapper's runs alternate with the baseline's (``interleaved``), and the row's ratio is the median
of each round's ratio (``compare="paired"``): the machine's speed drifts between rounds by more than
the two differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from _apis import (
    ACCOUNT,
    GRADIENT_BODY,
    GRADIENT_HEADERS,
    GRADIENT_PATH,
    KEY,
    MAX_TOKENS,
    MODEL,
    PROMPT,
    SCALE_HEADERS,
    SCALE_PATH,
    WORKSPACE,
    scale_body,
)
from _runs import cpu_per_request
from _stats import Row, Sizes, interleaved

from wrapper.gradient import Gradient
from wrapper.scale import Scale

__all__ = ["sync_rows"]


def _row(
    name: str,
    sizes: Sizes,
    client: Scale | Gradient,
    complete: Callable[[], Any],
    plain: httpx.Client,
    path: str,
    body: dict[str, Any],
) -> Row:
    """``complete()`` on the wrapper ``client`` against ``plain.post(path, json=body).json()``."""

    def post() -> Any:
        return plain.post(path, json=body).json()

    with client, plain:
        for call in (complete, post):  # connect, fill caches
            cpu_per_request(sizes.cpu_requests, call)()
        figures = interleaved(
            sizes.cpu_runs,
            {
                "wrapper": cpu_per_request(sizes.cpu_requests, complete),
                "httpx": cpu_per_request(sizes.cpu_requests, post),
            },
        )
    return Row(
        name,
        "µs CPU/request",
        figures["wrapper"],
        "httpx.Client",
        figures["httpx"],
        target=1.10,
        compare="paired",
    )


def sync_rows(url: str, sizes: Sizes) -> list[Row]:
    """The Scale and the Gradient row."""
    scale = Scale(api_key=KEY, account_id=ACCOUNT, base_url=url)
    gradient = Gradient(access_token=KEY, workspace_id=WORKSPACE, base_url=f"{url}/api")
    return [
        _row(
            f"sync Scale.complete x{sizes.cpu_requests}",
            sizes,
            scale,
            lambda: scale.complete(MODEL, PROMPT, max_tokens=MAX_TOKENS),
            httpx.Client(base_url=url, headers=SCALE_HEADERS),
            SCALE_PATH,
            scale_body(),
        ),
        _row(
            f"sync Gradient.complete x{sizes.cpu_requests}",
            sizes,
            gradient,
            lambda: gradient.complete(MODEL, PROMPT, max_generated_token_count=MAX_TOKENS),
            httpx.Client(base_url=url, headers=GRADIENT_HEADERS),
            GRADIENT_PATH,
            GRADIENT_BODY,
        ),
    ]
