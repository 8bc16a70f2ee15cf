"""Many deployments as one client: ``Router`` and ``AsyncRouter`` over ``Route``\\ s.

    from wrapper.router import Route, Router
    from wrapper.scale import Scale

    with Router([
        Route(Scale(api_key=k1), "llama-3-8b-instruct", requests_per_minute=600, name="us"),
        Route(Scale(api_key=k2), "llama-3-8b-instruct", requests_per_minute=600, name="eu"),
    ]) as router:
        r = router.complete("Alice was", max_tokens=16)   # r.route: "us" or "eu"

Each request goes to a route with budget left: each route is paced to its limits by a pacer of its own
(``wrapper.pacing.Pacer``, a 429 slowing that route only), and among routes with a turn free the load is
shared by weight. A retriable failure (connection error, timeout, 429, 5xx, as the retry policy says)
sends the request to another route; a request error is raised as it is. A route whose last answers
failed cools down for a few seconds, then is tried again. The clients' attempt loop runs each request:
the router only chooses where each attempt goes (``wrapper.Routing``). A request fails with
``AllRoutesFailedError`` only when every route has failed it, ``max_retries`` passes over after the
first. ``complete_many`` runs the batch of the clients (``wrapper.batch.complete_with``): a batch over
N routes runs at the sum of their limits, ``.stats.routes`` giving each route's figures.
"""

from ._errors import AllRoutesFailedError
from ._route import Route
from ._router import AsyncRouter, Router, RouterBase

__all__ = ["AllRoutesFailedError", "AsyncRouter", "Route", "Router", "RouterBase"]
