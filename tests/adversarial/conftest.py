"""Fixtures of the adversarial suite: the Prism mock servers and a running sandbox."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wrapper.sandbox import Sandbox

from ._servers import prism


@pytest.fixture(scope="session")
def prism_scale() -> Iterator[str]:
    """The base URL of ``prism mock specs/scale.yaml``."""
    with prism("scale.yaml") as url:
        yield url


@pytest.fixture(scope="session")
def prism_gradient() -> Iterator[str]:
    """The base URL of ``prism mock specs/gradient.json`` (its paths have no ``/api`` prefix)."""
    with prism("gradient.json") as url:
        yield url


@pytest.fixture(scope="module")
def shared_sandbox() -> Iterator[Sandbox]:
    """A sandbox shared by a module's tests; faults and stats are reset before each test that asks for it."""
    with Sandbox(seed=0) as sb:
        yield sb


@pytest.fixture
def fault_sandbox(shared_sandbox: Sandbox) -> Sandbox:
    """The module's sandbox with no queued faults and fresh stats."""
    shared_sandbox.clear_faults()
    shared_sandbox.reset_stats()
    return shared_sandbox
