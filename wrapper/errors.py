"""Every error the clients raise about an API call, in one tree keyed by what went wrong.

``APIError`` is the root. A request that never got a complete answer raises ``APIConnectionError``
(``APITimeoutError`` when it ran out of time, ``IncompleteStreamError`` when a stream's body ended
before its final chunk); an answer with an error status raises the ``APIStatusError`` subclass for
its status, or for Gradient's typed 4XX bodies the ``GradientError`` subclass named after the body's
``type``; a success whose body is not what the spec promises raises ``APIResponseValidationError``.
Arguments the spec forbids raise ``ValueError`` before any request is sent. Messages never contain
the credentials the request carried.

The hand-written tree is ``scripts/templates/exceptions.py``, which ``make regen`` copies to
``generated/exceptions.py``; one ``GradientError`` subclass per error ``type`` of Gradient's spec
is generated into ``generated/gradient/exceptions.py``. Every class here reports this module as its
own, so tracebacks, ``repr`` and pickles name ``wrapper.errors``.
"""

from wrapper._generated import exceptions as _tree
from wrapper._generated.exceptions import *  # noqa: F403
from wrapper._generated.gradient import exceptions as _gradient
from wrapper._generated.gradient.exceptions import *  # noqa: F403

__all__ = sorted(_tree.__all__ + _gradient.__all__)

for _name in __all__:
    globals()[_name].__module__ = __name__
