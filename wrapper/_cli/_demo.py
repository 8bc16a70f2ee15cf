"""``make demo``'s batch: 200 prompts through ``python -m wrapper batch`` with its progress bar."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

__all__ = ["demo_batch"]

_OPENINGS = ("Alice", "The White Rabbit", "The Dodo", "The Queen", "Down the rabbit-hole", "The little door")
_MODEL = "llama-3-8b-instruct"


def demo_batch(scale_base_url: str, count: int = 200) -> int:
    """A ``count``-prompt batch against the sandbox's Scale API, then a re-run that skips it all."""
    from wrapper._cli import main

    with tempfile.TemporaryDirectory() as tmp:
        inputs, output = Path(tmp, "prompts.jsonl"), Path(tmp, "results.jsonl")
        with inputs.open("w") as prompts:
            for index in range(count):
                prompt = f"{_OPENINGS[index % len(_OPENINGS)]} ({index})"
                prompts.write(json.dumps({"prompt": prompt, "max_tokens": 12}) + "\n")
        print(f"\npython -m wrapper batch scale {_MODEL} prompts.jsonl -o results.jsonl --concurrency 16")
        args = ["batch", "scale", _MODEL, str(inputs), "-o", str(output), "--concurrency", "16", "--progress"]
        args += ["--base-url", scale_base_url, "--api-key", "demo", "--account-id", "demo"]
        code = main(args)
        with output.open() as results:
            for _, line in zip(range(3), results, strict=False):
                print(f"  {line.strip()}")
        print("The same command again: every prompt is already in results.jsonl, so nothing is sent.")
        main(args)
    return code
