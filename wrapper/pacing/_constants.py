"""The numbers of a shared limit: how long a lease lasts, when a process counts as gone, and (in
``SCRIPT``) every constant the lease script uses, the pacer's own among them, so each has one home."""

from __future__ import annotations

from . import _opening
from . import _pacer as _pacing

__all__ = ["KNOWN", "LEASE", "REJOIN", "RETRY", "SCRIPT", "SEEN", "STEP"]

LEASE = 0.5
"""Seconds of the limit a lease books, over the processes sharing it: a process asks for its next
lease about this often (a step of the opening's, while it lasts)."""
STEP = 0.1
"""Seconds a step of a shared opening lasts: long enough for every process to report in it."""
SEEN = 2.0
"""A process not heard from for this long no longer counts among those sharing the leases."""
KNOWN = 60.0
"""A process not heard from for this long no longer counts in the share a process paces to alone."""
RETRY = 0.5
"""Seconds between two tries of a store that is away."""
REJOIN = 2 * RETRY
"""Seconds a process back with the store paces alone still, to its share: the others it shared with
come back within ``RETRY`` of it, and until then pace to theirs."""
TTL = 600.0
"""Seconds a limit's state outlives its last use in the store (its rate learnt from 429s with it)."""

SCRIPT = {
    "LEASE": LEASE,
    "REJOIN": REJOIN,
    "RETRY": RETRY,
    "STEP": STEP,
    "SEEN": SEEN,
    "KNOWN": KNOWN,
    "TTL": TTL,
    "RING": 40,  # slots of answers kept: RING * SLOT seconds cover WINDOW and a lease's late reports
    "SLOT": 0.1,
    "BURST": _pacing.BURST,
    "BACKOFF": _pacing.BACKOFF,
    "RECOVERY": _pacing.RECOVERY,
    "SHARE": _pacing.SHARE,
    "MIN_GOT": _pacing.MIN_GOT,
    "MIN_429S": _pacing.MIN_429S,
    "INTERVAL": _pacing.INTERVAL,
    "MIN_RATE": _pacing.MIN_RATE,
    "WINDOW": _pacing.WINDOW,
    "OPENING": _opening.OPENING,
}
"""Every constant of ``_lease.lua``, by its name there."""
