"""Many prompts through one client: what the clients' ``complete_many`` runs, for batches of your own.

``complete_many`` and ``acomplete_many`` are the clients' methods as functions of a client (their own
keyword arguments are ``BatchOptions``); ``acomplete_jobs`` takes explicit jobs, each with its own index
and parameters, and a ``Limiter`` of your own in place of the limits (the command line's batch and
``wrapper.ray`` run on it). Each prompt is one call of the client, paced (``wrapper.pacing``) and
counted through the clients' hooks (``wrapper.CallHooks``). ``complete_with`` and ``acomplete_with``
run a batch over any ``complete(prompt, **kwargs)`` that paces itself: a router's (``wrapper.router``),
whose ``complete_many`` they are. ``Pacer``, ``Limiter`` and ``checked_limit`` are ``wrapper.pacing``'s.
"""

from wrapper import FORGIVEN_429S
from wrapper.pacing import Limiter, Pacer, checked_limit, estimate_tokens

from ._run import (
    AsyncBatchIterator,
    AsyncCompleter,
    BatchIterator,
    BatchOptions,
    BatchResult,
    BatchStats,
    Job,
    acomplete_jobs,
    acomplete_many,
    acomplete_with,
    complete_many,
    complete_with,
)

__all__ = [
    "FORGIVEN_429S",
    "AsyncBatchIterator",
    "AsyncCompleter",
    "BatchIterator",
    "BatchOptions",
    "BatchResult",
    "BatchStats",
    "Job",
    "Limiter",
    "Pacer",
    "acomplete_jobs",
    "acomplete_many",
    "acomplete_with",
    "checked_limit",
    "complete_many",
    "complete_with",
    "estimate_tokens",
]
