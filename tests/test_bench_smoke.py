"""``make bench`` still runs: every row at tiny sizes (``--quick``), with numbers; timings are not judged
(so not ``serial``: a busy machine changes the figures, never the outcome)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long("parallel")  # 25-85 s of one process in make test

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    # row name prefix -> (baseline, target)
    "sync Scale.complete": ("httpx.Client", 1.1),
    "sync Gradient.complete": ("httpx.Client", 1.1),
    "async AsyncScale.complete": ("aiohttp", 1.2),
    "stream Scale.stream": ("httpx + httpx-sse", 1.2),
    "async AsyncScale.stream": ("aiohttp", 1.3),
    "import wrapper.scale": ("import httpx, aiohttp", 1.5),
    "import wrapper.gradient": ("import httpx, aiohttp", 1.5),
    "batch complete_many": ("20 prompts", 10.0),
    "async complete_many 40 prompts": ("ideal", 1.3),
    "async complete_many in flight": ("concurrency", 1.0),
    "sync complete_many in flight": ("concurrency", 1.0),
    "rate limit paced, rate": ("set", 0.1),
    "rate limit paced, 429s": ("requests", 0.01),
    "rate limit adaptive, rate": ("server's limit", 0.85),
    "rate limit adaptive, 429s": ("requests", 0.1),
    "rate limit adaptive short batch, wall": ("ideal: prompts / limit", 1.25),
    "rate limit adaptive short batch, 429s": ("requests", 0.05),
    "router, rate": ("sum of the routes' limits", 0.1),
    "router, 429s": ("requests", 0.01),
    "cache hit, SQLite": ("uncached complete", 0.25),
    "cache miss, SQLite": ("uncached complete", 500.0),
    "async cache, store calls on the loop, SQLite": ("store calls", 0.0),
    "cache hit, Redis": ("uncached complete", 0.25),  # redis-server is installed where the suite runs
    "cache miss, Redis": ("uncached complete", 500.0),
    "async cache, store calls on the loop, Redis": ("store calls", 0.0),
    "TLS async AsyncScale.complete": ("aiohttp", 1.1),
    "TLS sync on httpx:": ("httpx.Client", 1.0),
    "TLS sync on httpx2:": ("httpx2.Client", 1.0),
    "TLS async 20 at once, cold connections": ("aiohttp", 1.15),
    "TLS build and close on httpx:": ("target", 1.0),
    "TLS build and close on httpx2:": ("target", 1.0),
    "TLS async AsyncScale.stream": ("aiohttp", 1.2),
}


def _positive(figure: dict[str, float], zero: bool = False) -> bool:
    """Finite and above zero (or at least zero: a count of 429s may be none)."""
    return all(
        math.isfinite(figure[key]) and (figure[key] >= 0 if zero else figure[key] > 0)
        for key in ("median", "min", "max")
    )


def test_quick_bench_prints_and_writes_every_row(tmp_path: Path) -> None:
    results = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench" / "run.py"), "--quick", "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=180,  # a minute alone on a busy 2-CPU machine (the TLS rows start four servers)
        check=False,
    )
    assert run.returncode == 0, run.stderr

    rows = json.loads(results.read_text())["rows"]
    judged = {
        (prefix, row["baseline_name"], row["target"])
        for row in rows
        for prefix in EXPECTED
        if row["row"].startswith(prefix) and row["target"] is not None
    }
    assert judged == {(prefix, *expected) for prefix, expected in EXPECTED.items()}
    assert any(row["baseline_name"] == "httpx.AsyncClient" and row["target"] is None for row in rows)
    for row in rows:
        assert _positive(row["wrapper"], zero=row["compare"] == "share"), row
        assert _positive(row["baseline"]), row
        assert math.isfinite(row["value"]), row
        assert row["met"] in (True, False, None)
        assert f"| {row['row']} |" in run.stdout
    assert "| row | unit | wrapper | baseline | ratio | target | met |" in run.stdout
