"""What produced a results file: the run record it holds, and each result's fingerprint.

A run is its targets (one model; the routes of a router, which share its prompts; or the models or
routes of a fan-out, which each get every prompt) and the parameters every line gets (the flags').
Its record, ``{"run": {...}}``, the first line of the results file, gives each target's API, base URL
host, model and own parameters, and the flags' parameters. A resume compares the file's last record
with its own and refuses any difference, naming it; allowed on purpose, this run's record is appended.

Each result line's ``fingerprint`` hashes its request: the target's API, model and parameters (a
router's: every route's), the prompt, and the line's parameters over the flags'. The host is left out,
as where a request goes does not change what it asks. A result whose fingerprint is not its line's
request's is not done: its line is sent again (and its new result replaces it). A refused line's
result fingerprints the line as written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import httpx

from wrapper.batch import RUN

__all__ = ["Mode", "Run", "Target", "fingerprint_bits", "host_of", "refused_fingerprint"]

VERSION = 1
Mode = Literal["model", "routes", "fan-out"]
_MODES: dict[str, str] = {
    "model": "a batch on one model",
    "routes": "a batch over routes",
    "fan-out": "a fan-out (every prompt to each target)",
}


@attrs.frozen
class Target:
    """One model or route a run sends to: its name (in results, a fan-out's), API, base URL host, model,
    and its own parameters (a route's)."""

    name: str
    api: str
    host: str
    model: str
    params: Mapping[str, Any] = attrs.field(factory=dict)

    def described(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "api": self.api,
            "host": self.host,
            "model": self.model,
            "params": dict(self.params),
        }

    def asked(self) -> list[Any]:
        """What of it shapes a request (not where it goes)."""
        return [self.api, self.model, dict(self.params)]


def host_of(base_url: str) -> str:
    """A base URL's host and port, as ``host:port`` (``[::1]:3026`` for an IPv6 address)."""
    url = httpx.URL(base_url)
    host = f"[{url.host}]" if ":" in url.host else url.host
    return host if url.port is None else f"{host}:{url.port}"


@attrs.frozen
class Run:
    """A batch run: its ``mode``, its ``targets`` and the flags' ``params``."""

    mode: Mode
    targets: Sequence[Target]
    params: Mapping[str, Any]
    _asked: dict[str | None, str] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        asked: dict[str | None, str] = {target.name: _canonical(target.asked()) for target in self.targets}
        if self.mode != "fan-out":  # any route may serve a router's request
            asked = {None: _canonical(sorted((target.asked() for target in self.targets), key=_canonical))}
        object.__setattr__(self, "_asked", asked)

    @property
    def names(self) -> list[str | None]:
        """What a result line's ``target`` is: each target's name in a fan-out, else None (none)."""
        return [target.name for target in self.targets] if self.mode == "fan-out" else [None]

    def record(self) -> dict[str, Any]:
        """The record line: ``{"run": {"version", "mode", "targets": [...], "params"}}``."""
        targets = [target.described() for target in self.targets]
        return {RUN: {"version": VERSION, "mode": self.mode, "targets": targets, "params": dict(self.params)}}

    def fingerprint(self, target: str | None, prompt: str, params: Mapping[str, Any]) -> str:
        """The fingerprint of the request a line (its prompt, its parameters over the flags') makes to
        ``target``."""
        return _digest(f"[{self._asked[target]},{_canonical([prompt, params])}]".encode())

    def differences(self, recorded: object) -> list[str]:
        """How this run differs from the record of another (``record()``'s value); empty if it does not."""
        now = self.record()[RUN]
        if not isinstance(recorded, Mapping) or recorded.get("version") != VERSION:
            return ["its run record is not one this version writes"]
        if recorded.get("mode") != now["mode"]:
            return [
                f"{_MODES.get(str(recorded.get('mode')), 'another kind of run')}, now {_MODES[now['mode']]}"
            ]
        try:
            old = {target["name"]: target for target in recorded["targets"]}
            differences = _target_differences(
                old, {target["name"]: target for target in now["targets"]}, now["mode"]
            )
            return differences + _changes("", recorded["params"], now["params"])
        except (KeyError, TypeError):
            return ["its run record is not one this version writes"]


def _target_differences(old: dict[str, Any], new: dict[str, Any], mode: str) -> list[str]:
    if mode == "model":  # one target, named by its model
        ((_, was),), ((_, now),) = old.items(), new.items()
        return _changes("", _fields(was), _fields(now))
    differences = []
    if list(old) != list(new):
        differences.append(f"targets {', '.join(old)}, now {', '.join(new)}")
    for name in old.keys() & new.keys():
        differences += _changes(f"{name}'s ", _fields(old[name]), _fields(new[name]))
    return differences


def _fields(target: Mapping[str, Any]) -> dict[str, Any]:
    """A target's fields as compared: API, host, model, then its parameters."""
    params = {f"parameter {key}": value for key, value in target["params"].items()}
    return {"API": target["api"], "host": target["host"], "model": target["model"], **params}


def _changes(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``{prefix}{key} {old}, now {new}`` for each key whose value differs."""
    keys = [*old, *(key for key in new if key not in old)]
    return [
        f"{prefix}{key} {_shown(old, key)}, now {_shown(new, key)}"
        for key in keys
        if old.get(key, _UNSET) != new.get(key, _UNSET)
    ]


_UNSET = object()


def _shown(values: Mapping[str, Any], key: str) -> str:
    if key not in values:
        return "not set"
    value = values[key]
    return value if isinstance(value, str) else json.dumps(value)


def refused_fingerprint(raw: bytes) -> str:
    """The fingerprint of a refused line's result: the line as written."""
    return _digest(raw)


def fingerprint_bits(fingerprint: object) -> int:
    """A fingerprint's first 32 bits, as a results file keeps them in memory: never 0, which stands for
    a result with no fingerprint (one written before results had them), taken as any request's."""
    if not isinstance(fingerprint, str) or len(fingerprint) < 8:
        return 0
    try:
        return int(fingerprint[:8], 16) or 1
    except ValueError:
        return 0


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]
