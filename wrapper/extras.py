"""How to install an optional extra, for the error of a module that needs one.

No package index has ``completion-clients``, so ``pip install 'completion-clients[ray]'`` would fail;
the extra's own packages, as the installed package's metadata lists them, install anywhere.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """``pip install 'ray[data]>=2.60' (the ray extra)``: the command that installs what ``extra`` adds."""
    try:
        requires = importlib.metadata.requires("completion-clients") or []
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, never installed
        requires = []
    wanted = re.compile(rf"""\bextra\s*==\s*["']{re.escape(extra)}["']""")
    packages = [req for req, _, marker in (r.partition(";") for r in requires) if wanted.search(marker)]
    if not packages:
        return f"install completion-clients with its {extra} extra"
    return f"pip install {' '.join(shlex.quote(p.strip()) for p in packages)} (the {extra} extra)"
