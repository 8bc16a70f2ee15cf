"""A 1,000-prompt batch re-run with a warm cache sends nothing and gives back the same texts in the same
order: the command line's batch, then ``complete_many`` sync and async over the same cache."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from wrapper._cli import main
from wrapper.batch import read_results
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

MODEL = "llama-3-8b-instruct"
PROMPTS = [f"Prompt number {i} of the evaluation set" for i in range(1000)]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(seed=0) as sb:
        yield sb


def texts_by_index(path: Path) -> list[str]:
    rows = sorted(read_results(path), key=lambda row: row["index"])
    assert [row["index"] for row in rows] == list(range(len(PROMPTS)))
    return [row["text"] for row in rows]


def cached_flags(path: Path) -> list[bool]:
    return [row["cached"] for row in read_results(path)]


def test_a_warm_rerun_sends_nothing_and_gives_the_same_texts_in_order(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs, cache = tmp_path / "prompts.jsonl", str(tmp_path / "cache.db")
    inputs.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    flags = ["--base-url", sandbox.scale_base_url, "--api-key", "k", "--cache", cache, "--max-tokens", "6"]
    command = ["batch", "scale", MODEL, str(inputs), "--concurrency", "64", "--no-progress", *flags]

    assert main([*command, "-o", str(tmp_path / "cold.jsonl")]) == 0
    assert sandbox.stats().requests == 1000
    assert not any(cached_flags(tmp_path / "cold.jsonl"))
    expected = texts_by_index(tmp_path / "cold.jsonl")
    sandbox.reset_stats()

    capsys.readouterr()
    assert main([*command, "-o", str(tmp_path / "warm.jsonl")]) == 0
    assert "cache: 1000 answered from it, 0 sent" in capsys.readouterr().err
    assert texts_by_index(tmp_path / "warm.jsonl") == expected
    assert all(cached_flags(tmp_path / "warm.jsonl"))
    assert sandbox.stats().requests == 0

    with Scale(api_key="k", base_url=sandbox.scale_base_url, cache=cache) as scale:
        batch = scale.complete_many(MODEL, PROMPTS, concurrency=64, ordered=True, max_tokens=6)
        assert [r.completion.text for r in batch] == expected
        assert (batch.stats.cache_hits, batch.stats.cache_misses, batch.stats.requests) == (1000, 0, 0)

    async def rerun() -> tuple[list[str], int]:
        async with AsyncScale(api_key="k", base_url=sandbox.scale_base_url, cache=cache) as ascale:
            abatch = ascale.complete_many(MODEL, PROMPTS, concurrency=64, ordered=True, max_tokens=6)
            return [r.completion.text async for r in abatch], abatch.stats.cache_hits

    assert asyncio.run(rerun()) == (expected, 1000)
    assert sandbox.stats().requests == 0
