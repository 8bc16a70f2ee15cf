"""How many of the package's hand-written files one warm call runs code in: the path of a call stays short.

Counted as ``sys.setprofile`` sees them (and ``threading.setprofile``, for a sync batch's worker
threads): every Python function that runs during the call, by the file it is written in, for each file
of the installed package but the generated client (``wrapper/_generated``, which ``make regen``
writes). The bounds are the package's before its extras moved out of the core, which the move had
pushed to 14, 16 and 19; a batch never goes back through the API's module (``wrapper/scale.py``) for
each prompt.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import wrapper
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

PACKAGE = Path(wrapper.__file__).parent
MODEL = "llama-3-8b-instruct"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


class Seen:
    """The package's functions called while it is on, as ``(file relative to the package, function)``."""

    def __init__(self) -> None:
        self.calls: set[tuple[str, str]] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)):
                file = Path(name).relative_to(PACKAGE).as_posix()
                if not file.startswith("_generated/"):
                    self.calls.add((file, frame.f_code.co_name))

    @property
    def files(self) -> set[str]:
        return {file for file, _ in self.calls}

    def run(self, call: Callable[[], Any]) -> None:
        sys.setprofile(self)
        threading.setprofile(self)
        try:
            call()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


def test_a_warm_sync_complete_runs_code_in_twelve_files_at_most(sandbox: Sandbox) -> None:
    with Scale(api_key="k", base_url=sandbox.scale_base_url) as scale:
        scale.complete(MODEL, "Alice", max_tokens=2)
        seen = Seen()
        seen.run(lambda: scale.complete(MODEL, "Alice", max_tokens=2))
    assert len(seen.files) <= 12, sorted(seen.files)


def test_a_warm_async_complete_runs_code_in_fourteen_files_at_most(sandbox: Sandbox) -> None:
    seen = Seen()

    async def main() -> None:
        async with AsyncScale(api_key="k", base_url=sandbox.scale_base_url) as scale:
            await scale.complete(MODEL, "Alice", max_tokens=2)
            sys.setprofile(seen)
            try:
                await scale.complete(MODEL, "Alice", max_tokens=2)
            finally:
                sys.setprofile(None)

    asyncio.run(main())
    assert len(seen.files) <= 14, sorted(seen.files)


def test_a_batch_of_four_runs_code_in_sixteen_files_at_most_and_not_the_api_module_per_prompt(
    sandbox: Sandbox,
) -> None:
    with Scale(api_key="k", base_url=sandbox.scale_base_url) as scale:
        assert all(r.ok for r in scale.complete_many(MODEL, ["Alice"] * 4, max_tokens=2))
        seen = Seen()
        seen.run(lambda: list(scale.complete_many(MODEL, ["Alice"] * 4, max_tokens=2)))
    assert len(seen.files) <= 16, sorted(seen.files)
    assert {name for file, name in seen.calls if file == "scale.py"} == {"complete_many"}
    assert ("_core/sync_client.py", "call") in seen.calls  # each prompt: the core's call, straight
