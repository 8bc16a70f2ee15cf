"""``python -m wrapper.sandbox``: serve both APIs on localhost (see ``--help``)."""

from __future__ import annotations

import argparse

from . import HELP, serve
from ._limits import checked_limit


def _per_minute(text: str) -> float:
    """A ``--rpm``/``--tpm`` value: a positive number."""
    try:
        value = checked_limit("the limit", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}") from None
    assert value is not None
    return value


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m wrapper.sandbox",
        description="Gradient and Scale GP completion APIs on localhost, answered by a tiny language model.",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument("--port", type=int, default=3026, help="port to bind (default: %(default)s)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for sampling and fault rates (default: %(default)s)"
    )
    parser.add_argument(
        "--rpm", type=_per_minute, metavar="N", help="requests per minute per credential (default: no limit)"
    )
    parser.add_argument(
        "--tpm", type=_per_minute, metavar="N", help="tokens per minute per credential (default: no limit)"
    )
    args = parser.parse_args(argv)
    print(
        f"Sandbox: Gradient at http://{args.host}:{args.port}/api, Scale at http://{args.host}:{args.port}",
        flush=True,
    )
    serve(args.host, args.port, args.seed, rpm=args.rpm, tpm=args.tpm)


if __name__ == "__main__":
    main()
