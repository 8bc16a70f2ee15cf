"""Complete every prompt of a Parquet or JSONL dataset on Ray, writing Parquet: ``wrapper.ray`` end to end.

    python examples/ray_batch.py scale llama-3-8b-instruct prompts.jsonl results/ \\
        --base-url http://127.0.0.1:3026 --rpm 600 --workers 2 --concurrency 16 --max-tokens 32

Runs on a local Ray cluster unless ``--address`` names one (``auto``, or ``ray://head:10001``).
Credentials come from the environment, as the clients read it: ``SGP_API_KEY`` (and
``SGP_ACCOUNT_ID``) for Scale, ``GRADIENT_ACCESS_TOKEN`` and ``GRADIENT_WORKSPACE_ID`` for Gradient;
they are read here, on the driver, and reach the workers redacted from Ray's logs.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import ray
import ray.data

from wrapper.ray import complete_dataset

MAX_TOKENS = {"scale": "max_tokens", "gradient": "max_generated_token_count"}


def read(path: str) -> ray.data.Dataset:
    """Parquet (a file or a directory of them) or JSON Lines (``.jsonl``/``.json``, one object a line)."""
    if path.endswith((".jsonl", ".json", ".jsonl.gz")):
        return ray.data.read_json(path)
    return ray.data.read_parquet(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("api", choices=["scale", "gradient"])
    parser.add_argument("model", help="Scale deployment id or Gradient model id")
    parser.add_argument("input", help="Parquet file or directory, or a .jsonl file")
    parser.add_argument("output", help="directory to write the Parquet results to")
    parser.add_argument("--address", help="Ray cluster to join (default: start a local one)")
    parser.add_argument("--base-url", help="the API's base URL (default: the client's, or its env variable)")
    parser.add_argument("--prompt-column", default="prompt")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors, each with one client")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight per worker")
    parser.add_argument("--rpm", type=float, help="requests per minute, for the whole cluster")
    parser.add_argument("--tpm", type=float, help="tokens per minute, for the whole cluster")
    parser.add_argument("--max-tokens", type=int, help="the most tokens to generate per prompt")
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--on-error", choices=["column", "raise"], default="column")
    args = parser.parse_args()

    ray.init(address=args.address, include_dashboard=False)
    options: dict[str, Any] = {"max_retries": args.max_retries}
    if args.base_url:
        options["base_url"] = args.base_url
    params = {MAX_TOKENS[args.api]: args.max_tokens} if args.max_tokens is not None else {}
    started = time.perf_counter()
    results = complete_dataset(
        read(args.input),
        args.api,
        args.model,
        prompt_column=args.prompt_column,
        workers=args.workers,
        concurrency=args.concurrency,
        requests_per_minute=args.rpm,
        tokens_per_minute=args.tpm,
        client_options=options,
        on_error=args.on_error,
        **params,
    )
    results.write_parquet(args.output)
    elapsed = time.perf_counter() - started
    written = ray.data.read_parquet(args.output).select_columns(["error"])
    rows = failed = 0
    for block in written.iter_batches(batch_size=None, batch_format="pyarrow"):
        rows += block.num_rows
        failed += block.num_rows - block.column("error").null_count
    print(f"{rows} rows in {elapsed:.1f} s ({rows / elapsed:.1f} rows/s), {failed} failed -> {args.output}")


if __name__ == "__main__":
    main()
