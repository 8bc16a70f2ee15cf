"""``python -m wrapper`` and the ``completion-clients`` console script: see ``--help``."""

import os
import sys

from wrapper._cli import main as _main

__all__ = ["main"]


def main() -> int:
    """The ``completion-clients`` console script: the command line under the name it was run by."""
    return _main(prog=os.path.basename(sys.argv[0]))


if __name__ == "__main__":
    raise SystemExit(_main(prog="python -m wrapper"))
