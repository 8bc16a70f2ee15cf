"""``python -m wrapper``: see ``python -m wrapper --help``."""

from wrapper._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
