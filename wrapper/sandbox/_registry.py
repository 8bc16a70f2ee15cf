"""Every API's handler, found by the API's name: ``wrapper.sandbox._<name>`` defines ``HANDLER``.

Apart from ``_handler``, which the handlers build on: a module that imported them by name and that they
import would be a circle.
"""

from __future__ import annotations

import importlib
from functools import cache

from wrapper import apis as _api

from ._handler import Handler

__all__ = ["registry"]


@cache
def registry() -> dict[str, Handler]:
    """Every API's handler, by name, in the order of ``wrapper.apis.NAMES``."""
    handlers = {name: importlib.import_module(f"{__package__}._{name}").HANDLER for name in _api.NAMES}
    for name, handler in handlers.items():
        if not isinstance(handler, Handler) or handler.name != name:
            raise TypeError(f"wrapper.sandbox._{name}.HANDLER must be the Handler named {name!r}")
    return handlers
