"""``tests/preloaded_python.py`` runs a script as ``python script.py`` would, each in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from preloaded_python import PreloadedPython


@pytest.fixture(scope="module")
def preloaded() -> Iterator[PreloadedPython]:
    python = PreloadedPython(dict(os.environ))
    yield python
    python.close()


def script(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def test_a_script_sees_what_python_script_py_shows_it(preloaded: PreloadedPython, tmp_path: Path) -> None:
    probe = script(
        tmp_path,
        """
        import os, sys
        print(sys.argv, sys.path[0], __file__, __name__, __spec__, sys.modules["__main__"].__file__)
        print(sorted(globals()), os.getcwd(), os.environ["PROBE"])
        print("to stderr", file=sys.stderr)
        """,
    )
    env = {**os.environ, "PROBE": "set for this run"}
    expected = subprocess.run(
        [sys.executable, probe.name], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    done = preloaded.run(probe, env, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (0, expected.stdout, expected.stderr)


def test_it_exits_as_python_would(preloaded: PreloadedPython, tmp_path: Path) -> None:
    exits = script(
        tmp_path,
        """
        import atexit, sys
        atexit.register(print, "atexit ran")
        sys.exit(3)
        """,
    )
    done = preloaded.run(exits, dict(os.environ), timeout=30)
    assert (done.returncode, done.stdout) == (3, "atexit ran\n")
    raises = script(tmp_path, "print('before')\nraise ValueError('boom')\n")
    done = preloaded.run(raises, dict(os.environ), timeout=30)
    assert (done.returncode, done.stdout) == (1, "before\n")
    assert done.stderr.startswith("Traceback"), done.stderr
    assert done.stderr.endswith("ValueError: boom\n"), done.stderr


def test_nothing_a_script_does_reaches_the_next(preloaded: PreloadedPython, tmp_path: Path) -> None:
    changes = script(
        tmp_path,
        """
        import os, wrapper.scale
        print(getattr(wrapper.scale, "CHANGED", None), os.environ.get("CHANGED"))
        wrapper.scale.CHANGED = os.environ["CHANGED"] = "yes"
        """,
    )
    runs = [preloaded.run(changes, dict(os.environ), timeout=30) for _ in range(2)]
    assert [done.stdout for done in runs] == ["None None\n"] * 2


def test_a_script_past_its_timeout_is_killed_and_the_next_runs(
    preloaded: PreloadedPython, tmp_path: Path
) -> None:
    sleeps = script(tmp_path, "import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:  # killed: not left to the suite's timeout
        preloaded.run(sleeps, dict(os.environ), timeout=1)
    assert timed_out.value.output == b"started\n"
    assert preloaded.run(script(tmp_path, "print('next')"), dict(os.environ), timeout=30).stdout == "next\n"
