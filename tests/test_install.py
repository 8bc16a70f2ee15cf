"""The package as ``make install`` installs it: type checkers run from outside the checkout resolve it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT


def test_mypy_run_outside_the_checkout_sees_the_installed_package(tmp_path: Path, mypy_cache: Path) -> None:
    user_code = tmp_path / "use.py"
    user_code.write_text(
        'from wrapper.scale import Scale\n\nScale(api_key="k").complete("m", "p", max_tokns=5)\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(mypy_cache), user_code.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert not tmp_path.is_relative_to(ROOT)
    assert "Cannot find implementation or library stub" not in checked.stdout, checked.stdout
    assert (
        'use.py:3: error: Unexpected keyword argument "max_tokns" for "complete" of "Scale"' in checked.stdout
    )
    assert checked.returncode == 1, checked.stdout + checked.stderr
