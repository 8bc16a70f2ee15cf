"""``python -m wrapper.sandbox``: serve both APIs on localhost (see ``--help``)."""

from __future__ import annotations

import argparse

from . import HELP, serve


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
    args = parser.parse_args(argv)
    print(
        f"Sandbox: Gradient at http://{args.host}:{args.port}/api, Scale at http://{args.host}:{args.port}",
        flush=True,
    )
    serve(args.host, args.port, args.seed)


if __name__ == "__main__":
    main()
