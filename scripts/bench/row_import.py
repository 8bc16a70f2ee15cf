"""Import cost: ``python -c "import wrapper.scale"`` (and ``.gradient``) vs ``import httpx, aiohttp``.

A client module loads what building a client and its first call need (aiohttp, httpx's anyio backend,
the generated models, the TLS context, the User-Agent), so that neither does it inside an event loop:
the baseline is the two HTTP libraries the clients send with.

The figure is the child process's CPU time (user + system, from ``RUSAGE_CHILDREN`` deltas),
interpreter start-up included for all alike. Bytecode caches are written by a first, unmeasured
run (``PYTHONDONTWRITEBYTECODE`` is dropped for the children), as pip writes them for an installed
package; otherwise the wrapper, imported from the source tree, would be compiled on every run.
The note lists any heavy module an import pulled in that should load only when first used.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from _stats import Row, Sizes, interleaved

__all__ = ["import_rows"]

ROOT = Path(__file__).resolve().parents[2]
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
HEAVY = ("starlette", "uvicorn", "tqdm", "yaml", "wrapper.sandbox")


def _child_cpu_ms(code: str) -> Callable[[], float]:
    def run() -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=_ENV)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3

    return run


def _heavy_modules(module: str) -> list[str]:
    """The heavy modules ``import module`` loads."""
    code = f"import sys, {module}; print(*[name for name in {HEAVY!r} if name in sys.modules])"
    run = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, env=_ENV, capture_output=True, text=True
    )
    return run.stdout.split()


def import_rows(sizes: Sizes) -> list[Row]:
    """One row per wrapper module, each against the same ``import httpx, aiohttp`` figure."""
    modules = ["wrapper.scale", "wrapper.gradient"]
    variants = {module: _child_cpu_ms(f"import {module}") for module in [*modules, "httpx, aiohttp"]}
    for run in variants.values():  # write the bytecode caches
        run()
    figures = interleaved(sizes.import_runs, variants)
    rows = []
    for module in modules:
        heavy = _heavy_modules(module)
        note = f"also loads {', '.join(heavy)}" if heavy else "loads none of " + ", ".join(HEAVY)
        rows.append(
            Row(
                f"import {module}",
                "ms CPU",
                figures[module],
                "import httpx, aiohttp",
                figures["httpx, aiohttp"],
                1.5,
                note=note,
            )
        )
    return rows
