"""Type checkers see the keyword arguments: mypy accepts the documented calls and rejects misspellings."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api as mypy

SNIPPET = """
import asyncio

from wrapper import RetryPolicy
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.scale import AsyncScale, Scale

scale = Scale(api_key="k")
scale.complete("m", "p", max_tokens=5, temperature=0.5)
scale.stream("m", "p", stop_sequences=["."])
scale.complete_many("m", ["p"], concurrency=4, max_tokens=5)
scale.complete_many("m", ["p"], max_tokns=5)  # error: complete_many
scale.complete("m", "p", max_tokens="5")  # error: complete type
scale.complete("m", "p", timeout=5, extra_headers={"X-Team": "a"}, extra_body={"new": 1}, retry=RetryPolicy())
scale.complete("m", "p", max_retrie=1)  # error: misspelt option
scale.with_options(deadline=10, stream_idle_timeout=2).stream("m", "p").get_final_completion().text
scale.with_options(tiemout=1)  # error: misspelt option of with_options
scale.with_raw_response.complete("m", "p").parse().text
Scale(api_key="k", retry=RetryPolicy(max_backoff=2), deadline=30.0, stream_idle_timeout=5.0)
gradient = Gradient(access_token="t", workspace_id="w")
gradient.complete("m", "p", guidance=["yes", "no"], max_generated_token_count=8)
gradient.complete_many("m", ["p"], max_tokens=5)  # error: gradient complete_many


async def main() -> None:
    ascale = AsyncScale(api_key="k")
    await ascale.complete("m", "p", max_tokens=5)
    ascale.complete_many("m", ["p"], top_kk=3)  # error: async complete_many
    agradient = AsyncGradient(access_token="t", workspace_id="w")
    await agradient.complete("m", "p", rag_collection="c")
"""


def test_mypy_accepts_documented_calls_and_rejects_misspelt_keywords(
    tmp_path: Path, mypy_cache: Path
) -> None:
    source = tmp_path / "usage.py"
    source.write_text(textwrap.dedent(SNIPPET))
    out, err, status = mypy.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(mypy_cache), str(source)]
    )
    assert status == 1, out + err
    flagged = {int(match) for match in re.findall(rf"{re.escape(str(source))}:(\d+): error", out)}
    expected = {number for number, line in enumerate(source.read_text().splitlines(), 1) if "# error" in line}
    assert flagged == expected, out
