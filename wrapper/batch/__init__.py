"""Many prompts through one client: what the clients' ``complete_many`` runs, for batches of your own.

``complete_many`` and ``acomplete_many`` are the clients' methods as functions of a client (their own
keyword arguments are ``BatchOptions``); ``acomplete_jobs`` takes explicit jobs, each with its own index
and parameters, and a ``Limiter`` of your own in place of the limits (the command line's batch and
``wrapper.ray`` run on it). Each prompt is one call of the client, paced (``wrapper.pacing``) and
counted through the clients' hooks (``wrapper.CallHooks``). ``complete_with`` and ``acomplete_with``
run a batch over any ``complete(prompt, **kwargs)`` that paces itself: a router's (``wrapper.router``),
whose ``complete_many`` they are; ``fan_out_with``, ``afan_out_with`` and ``afan_out_jobs`` send every
prompt to each of several such targets (a router's ``fan_out``). ``Pacer``, ``Limiter`` and
``checked_limit`` are ``wrapper.pacing``'s.

A ``Budget`` caps what a batch sends. Results have one format, the result line (``BatchResult.to_dict()``,
the command line's results files, Ray's columns): ``read_results`` reads a results file's, and
``ResultTotals`` adds lines up.
"""

from wrapper import FORGIVEN_429S
from wrapper.pacing import Limiter, Pacer, checked_limit, estimate_tokens

from ._budget import Budget
from ._fan_out import TargetJob, afan_out_jobs, afan_out_with, fan_out_with
from ._format import (
    RESULT_FIELDS,
    RUN,
    InputLineError,
    completion_fields,
    error_fields,
    error_object,
    read_results,
    result_key,
)
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
from ._totals import ResultTotals

__all__ = [
    "FORGIVEN_429S",
    "RESULT_FIELDS",
    "RUN",
    "AsyncBatchIterator",
    "AsyncCompleter",
    "BatchIterator",
    "BatchOptions",
    "BatchResult",
    "BatchStats",
    "Budget",
    "InputLineError",
    "Job",
    "Limiter",
    "Pacer",
    "ResultTotals",
    "TargetJob",
    "acomplete_jobs",
    "acomplete_many",
    "acomplete_with",
    "afan_out_jobs",
    "afan_out_with",
    "checked_limit",
    "complete_many",
    "complete_with",
    "completion_fields",
    "error_fields",
    "error_object",
    "estimate_tokens",
    "fan_out_with",
    "read_results",
    "result_key",
]
