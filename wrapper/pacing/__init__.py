"""Pacing: client-side rate limits, the layer under the batch, the router and Ray.

``Pacer`` paces requests to requests and tokens per minute, evenly, slowing down on 429s, and opens
slowly when no limit is given. ``Limiter`` is where a limit is kept, the seam a limit kept elsewhere
plugs into: a ``Pacer`` keeps one in this process, ``wrapper.ray``'s leases one shared by a cluster.
Their words are the same: a request ``acquire``\\ s its turn (sync code waits each of ``turns``, with
``wait_turn``), ``settle``\\ s the tokens it used (``used_tokens``, against ``estimate_tokens``), and a
429 says it was ``throttled``. ``checked_limit`` checks a limit as every extra takes one.
"""

from ._pacer import Limiter, Pacer, await_turn, checked_limit, estimate_tokens, used_tokens, wait_turn

__all__ = ["Limiter", "Pacer", "await_turn", "checked_limit", "estimate_tokens", "used_tokens", "wait_turn"]
