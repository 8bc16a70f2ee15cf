"""``ResultTotals``: what a set of result lines adds up to, overall and per target or route."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ResultTotals"]


class ResultTotals:
    """Sums over result lines (``wrapper.batch``'s format): ``results``, ``succeeded``, ``failures`` by
    error type, ``prompt_tokens`` and ``response_tokens`` as the answers reported them; and the same per
    target (``targets``: the lines of a fan-out) or else per route (``routes``: those of a batch over
    routes that a route served).

    The command line's summary gives them for its results file, ``wrapper.ray.summarize`` for a Dataset.
    """

    def __init__(self) -> None:
        self.results = self.succeeded = self.prompt_tokens = self.response_tokens = 0
        self.failures: dict[str, int] = {}
        self.targets: dict[str, ResultTotals] = {}
        self.routes: dict[str, ResultTotals] = {}

    @property
    def failed(self) -> int:
        """The lines that are errors."""
        return self.results - self.succeeded

    def add(self, line: Mapping[str, Any]) -> None:
        """Count one result line (its target's or route's totals too)."""
        self._count(line)
        target, route = line.get("target"), line.get("route")
        if target is not None:
            self.targets.setdefault(target, ResultTotals())._count(line)
        elif route is not None:
            self.routes.setdefault(route, ResultTotals())._count(line)

    def _count(self, line: Mapping[str, Any]) -> None:
        self.results += 1
        error = line.get("error")
        if error is None:
            self.succeeded += 1
        else:
            kind = str(error.get("type")) if isinstance(error, Mapping) else "error"
            self.failures[kind] = self.failures.get(kind, 0) + 1
        self.prompt_tokens += line.get("prompt_tokens") or 0
        self.response_tokens += line.get("response_tokens") or 0

    def as_dict(self) -> dict[str, Any]:
        """The totals as JSON types: ``results``, ``succeeded``, ``failed``, ``failures`` (by type, most
        first), ``prompt_tokens``, ``response_tokens``, and ``targets`` or ``routes`` when there are any
        (each name's own, alike)."""
        totals: dict[str, Any] = {
            "results": self.results,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "failures": dict(sorted(self.failures.items(), key=lambda item: (-item[1], item[0]))),
            "prompt_tokens": self.prompt_tokens,
            "response_tokens": self.response_tokens,
        }
        for name, groups in (("targets", self.targets), ("routes", self.routes)):
            if groups:
                totals[name] = {key: groups[key].as_dict() for key in sorted(groups)}
        return totals

    def describe(self) -> str:
        """One line: ``N results: S succeeded, F failed (k Type, ...); P prompt tokens, R response
        tokens``."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in self.as_dict()["failures"].items())
        return (
            f"{self.results} results: {self.succeeded} succeeded, {self.failed} failed"
            + (f" ({kinds})" if kinds else "")
            + f"; {self.prompt_tokens} prompt tokens, {self.response_tokens} response tokens"
        )
