"""Many prompts through one client: what the clients' ``complete_many`` runs, for batches of your own.

``complete_many`` and ``acomplete_many`` are the clients' methods as functions of a client;
``acomplete_jobs`` takes explicit jobs, each with its own index and parameters, and a ``Limiter`` of
your own in place of the limits (the command line's batch and ``wrapper.ray`` run on it). ``Pacer`` is
the limiter a batch uses by default: requests and tokens per minute paced evenly, slowing down on
429s, and opening slowly when no limit is given. Each prompt is one ``complete`` call of the client,
paced and counted through the clients' hooks (``wrapper.CallHooks``).
"""

from ._pacing import Limiter, Pacer, checked_limit
from ._run import (
    AsyncBatchIterator,
    BatchIterator,
    BatchResult,
    BatchStats,
    Job,
    acomplete_jobs,
    acomplete_many,
    complete_many,
)

__all__ = [
    "AsyncBatchIterator",
    "BatchIterator",
    "BatchResult",
    "BatchStats",
    "Job",
    "Limiter",
    "Pacer",
    "acomplete_jobs",
    "acomplete_many",
    "checked_limit",
    "complete_many",
]
