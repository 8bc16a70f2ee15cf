"""Streaming: one long SSE stream through ``Scale.stream`` vs plain httpx + httpx-sse.

The figure is the client process's CPU time per chunk; the baseline parses each event's JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import httpx_sse
from _apis import ACCOUNT, KEY, MODEL, PROMPT, SCALE_HEADERS, SCALE_PATH, scale_body
from _stats import Row, Sizes, interleaved

from wrapper.scale import Scale

__all__ = ["stream_rows"]


def _cpu_per_chunk(chunks: int, stream: Callable[[], Iterable[Any]]) -> Callable[[], float]:
    def run() -> float:
        start = time.process_time()
        received = sum(1 for _ in stream())
        elapsed = time.process_time() - start
        if received != chunks:
            raise RuntimeError(f"expected {chunks} chunks, got {received}")
        return elapsed / chunks * 1e6

    return run


def stream_rows(url: str, sizes: Sizes) -> list[Row]:
    """The one streaming row."""
    body = scale_body(stream=True, max_tokens=sizes.chunks)

    def plain_stream() -> Iterable[Any]:
        with httpx_sse.connect_sse(plain, "POST", SCALE_PATH, json=body) as events:
            for event in events.iter_sse():
                yield json.loads(event.data)

    with (
        Scale(api_key=KEY, account_id=ACCOUNT, base_url=url) as scale,
        httpx.Client(base_url=url, headers=SCALE_HEADERS) as plain,
    ):
        variants = {
            "wrapper": _cpu_per_chunk(
                sizes.chunks, lambda: scale.stream(MODEL, PROMPT, max_tokens=sizes.chunks)
            ),
            "httpx-sse": _cpu_per_chunk(sizes.chunks, plain_stream),
        }
        for run in variants.values():
            run()
        figures = interleaved(sizes.runs, variants)
    return [
        Row(
            f"stream Scale.stream {sizes.chunks} chunks",
            "µs CPU/chunk",
            figures["wrapper"],
            "httpx + httpx-sse",
            figures["httpx-sse"],
            target=1.2,
        )
    ]
