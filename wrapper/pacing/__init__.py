"""Pacing: client-side rate limits, the layer under the batch, the router and Ray.

``Pacer`` paces requests to requests and tokens per minute, evenly, slowing down on 429s, and opens
slowly when no limit is given; ``Limiter`` is what paces an async batch (a ``Pacer``, or one limit
shared by many processes: ``wrapper.ray``'s leases). ``checked_limit`` checks a limit as every
extra takes one, and ``estimate_tokens`` is a request's token cost before it is sent.
"""

from ._pacer import Limiter, Pacer, checked_limit, estimate_tokens

__all__ = ["Limiter", "Pacer", "checked_limit", "estimate_tokens"]
