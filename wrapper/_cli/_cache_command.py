"""``python -m wrapper cache stats|clear STORE``: what a response cache holds, or empty it."""

from __future__ import annotations

import argparse
import sys

__all__ = ["STORE_HELP", "add_cache_parser", "run_cache"]

STORE_HELP = "the cache: an SQLite file's path, or a redis:// URL"


def add_cache_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> str:
    """The ``cache`` command's parser; returns the line the top ``--help`` shows for it."""
    cache = commands.add_parser(
        "cache",
        help="show what a response cache holds, or empty it",
        description="Show what a response cache holds (entries not expired, their bytes), or remove "
        "every entry. A Redis cache's keys are those under the prefix the clients use.",
    )
    cache.set_defaults(command_parser=cache)
    actions = cache.add_subparsers(dest="action", required=True, metavar="{stats,clear}")
    for action, summary in (("stats", "what the cache holds"), ("clear", "remove every entry")):
        sub = actions.add_parser(action, help=summary, description=summary[0].upper() + summary[1:] + ".")
        sub.set_defaults(command_parser=sub)
        sub.add_argument("store", metavar="STORE", help=STORE_HELP)
    return "cache {stats,clear} STORE: show what a response cache holds, or empty it\n"


def run_cache(args: argparse.Namespace) -> int:
    """Run ``cache stats`` or ``cache clear``: 0 done, 1 the store failed, 2 no cache at that path."""
    from wrapper.cache import open_store

    try:
        store = open_store(args.store, create=False)
    except FileNotFoundError as exc:
        args.command_parser.error(str(exc))
    try:
        if args.action == "stats":
            stats = store.stats()
            ttl = "none (entries never expire)" if stats.ttl is None else f"{stats.ttl:g} s"
            print(f"store: {stats.location}\nentries: {stats.entries}\nsize: {stats.size} bytes\nttl: {ttl}")
        else:
            print(f"removed {store.clear()} entries from {store.location}")
    except Exception as exc:  # unreachable, corrupt, another program's file: say so, and fail
        print(f"error: the cache at {store.location} failed: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0
