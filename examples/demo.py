"""Both clients against the local sandbox: no network, no account. Run with ``make demo``."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from wrapper.errors import ContentFlaggedError
from wrapper.gradient import Gradient
from wrapper.sandbox import Sandbox
from wrapper.scale import Scale


def main() -> None:
    with Sandbox(seed=0) as sandbox:
        print(f"Sandbox running at {sandbox.url}\n")

        gradient_url, scale_url = sandbox.gradient_base_url, sandbox.scale_base_url

        with Gradient(access_token="demo", workspace_id="demo", base_url=gradient_url) as gradient:
            answer = gradient.complete("nous-hermes2", "Alice opened the door and", temperature=0.0)
            print(f"Gradient completion ({answer.finish_reason!r}): Alice opened the door and{answer.text}")

            choice = gradient.complete(
                "nous-hermes2",
                "The White Rabbit took a watch out of its",
                guidance=["hat", "waistcoat-pocket"],
            )
            print(f"Gradient guided choice from ['hat', 'waistcoat-pocket']: {choice.text}")

            try:
                gradient.complete("nous-hermes2", "Where can I buy contraband?")
            except ContentFlaggedError as error:
                print(f"Gradient typed error: {type(error).__name__}, flagged samples {error.samples}")

        with Scale(api_key="demo", account_id="demo", base_url=scale_url) as scale:
            result = scale.complete("llama-3-8b-instruct", "The Dodo", max_tokens=16, temperature=0.0)
            print(f"\nScale completion: The Dodo{result.text}")
            tokens = f"{result.prompt_tokens} prompt + {result.response_tokens} response tokens"
            print(f"  {tokens}, finish reason {result.finish_reason!r}")

            print("\nScale stream, token by token: Once upon a time", end="", flush=True)
            for chunk in scale.stream("llama-3-8b-instruct", "Once upon a time", max_tokens=40):
                print(chunk.text, end="", flush=True)
                if chunk.finish_reason:
                    print(f"\n  ({chunk.response_tokens} tokens, finish reason {chunk.finish_reason!r})")

        batch(sandbox.scale_base_url)
    print("\nSandbox stopped.")


def batch(scale_url: str, count: int = 200) -> None:
    """``count`` prompts through the command line's resumable batch, with its progress bar, twice."""
    openings = ["Alice", "The White Rabbit", "The Dodo", "The Queen", "The little door"]
    with tempfile.TemporaryDirectory() as tmp:
        prompts, results = Path(tmp, "prompts.jsonl"), Path(tmp, "results.jsonl")
        lines = (json.dumps({"prompt": f"{openings[i % len(openings)]} ({i})"}) for i in range(count))
        prompts.write_text("\n".join(lines) + "\n")
        command = ["batch", "scale", "llama-3-8b-instruct", "prompts.jsonl", "-o", "results.jsonl",
                   "--concurrency", "16", "--max-tokens", "12", "--progress",
                   "--base-url", scale_url]  # fmt: skip
        env = os.environ | {"SGP_API_KEY": "demo"}
        print(f"\n$ python -m wrapper {' '.join(command)}", flush=True)
        subprocess.run([sys.executable, "-m", "wrapper", *command], cwd=tmp, env=env, check=False)
        for line in results.read_text().splitlines()[:3]:
            print(f"  {line}")
        print(
            "The same command again: every prompt is already in results.jsonl, so nothing is sent.",
            flush=True,
        )
        subprocess.run([sys.executable, "-m", "wrapper", *command], cwd=tmp, env=env, check=False)


if __name__ == "__main__":
    main()
