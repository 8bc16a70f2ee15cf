"""``python -m wrapper.sandbox``: serve both APIs on localhost (see ``--help``)."""

from __future__ import annotations

import argparse
import sys

from . import HELP, serve
from ._catalog import REJECTED_CREDENTIAL
from ._faults import parse_rule
from ._guards import CLIENT_TIMEOUT, MAX_BODY
from ._limits import checked_limit
from ._registry import registry
from ._server import checked_port


def _fault(text: str) -> str:
    """A ``--fault`` rule, checked now so that a typo is a usage error, not a crash at start."""
    try:
        parse_rule(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


def _port(text: str) -> int:
    """A ``--port`` value: a TCP port number (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    try:
        return checked_port(port)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> float:
    """A ``--rpm``/``--tpm``/``--client-timeout`` value: a positive number."""
    try:
        value = checked_limit("the value", float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}") from None
    assert value is not None
    return value


def _bytes(text: str) -> int:
    """A ``--max-body`` value: a whole number of bytes >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of bytes >= 1, not {text!r}")
    return int(text)


INTERRUPTED = 130
"""The exit status after Ctrl-C (SIGINT), as shells report a process it stopped."""


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve until interrupted; return the exit status (usage errors exit 2)."""
    parser = argparse.ArgumentParser(
        prog="python -m wrapper.sandbox",
        description=f"The {' and '.join(h.title for h in registry().values())} completion APIs on "
        "localhost, answered by a tiny language model.",
        epilog=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: %(default)s)")
    parser.add_argument("--port", type=_port, default=3026, help="port to bind (default: %(default)s)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for sampling and fault rates (default: %(default)s)"
    )
    parser.add_argument(
        "--rpm", type=_positive, metavar="N", help="requests per minute per credential (default: no limit)"
    )
    parser.add_argument(
        "--tpm", type=_positive, metavar="N", help="tokens per minute per credential (default: no limit)"
    )
    handlers = registry().values()
    for handler in handlers:
        parser.add_argument(
            handler.checked.flag,
            metavar=handler.credential_metavar,
            help=f"accept only this {handler.title} {handler.credential_help}; others get 401 "
            f"(default: any but {REJECTED_CREDENTIAL!r})",
        )
    parser.add_argument(
        "--any-model",
        action="store_true",
        help="serve an unknown model id with its API's first model instead of a 404 (for placeholder ids)",
    )
    parser.add_argument(
        "--max-body",
        type=_bytes,
        default=MAX_BODY,
        metavar="BYTES",
        help="answer 413 to a request body over this many bytes, unread (default: %(default)s)",
    )
    parser.add_argument(
        "--client-timeout",
        type=_positive,
        default=CLIENT_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request head takes longer; answer 408 to a body that does "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--log",
        action="store_true",
        help="print a line per request to stderr: method, path, status, seconds, fault, request id",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        type=_fault,
        metavar="RULE",
        help="queue a fault rule at start, e.g. 'status=503;count=2' (repeatable: the rules compose, below)",
    )
    args = parser.parse_args(argv)
    try:
        serve(
            args.host,
            args.port,
            args.seed,
            rpm=args.rpm,
            tpm=args.tpm,
            **{h.checked.keyword: getattr(args, h.checked.keyword) for h in handlers},
            any_model=args.any_model,
            max_body=args.max_body,
            client_timeout=args.client_timeout,
            log=args.log,
            faults=args.fault,
        )
    except KeyboardInterrupt:  # Ctrl-C: the way to stop it, so no traceback
        print("Sandbox stopped", file=sys.stderr)
        return INTERRUPTED
    except ValueError as exc:  # a credential the sandbox can't compare
        parser.error(str(exc))
    except OSError as exc:  # the port is busy, or not ours to bind
        parser.exit(1, f"{parser.prog}: error: {exc.strerror or exc}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
