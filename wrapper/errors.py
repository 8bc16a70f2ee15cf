"""Every error the clients raise about an API call, in one tree keyed by what went wrong.

``APIError`` is the root. A request that never got a complete answer raises ``APIConnectionError``
(``APITimeoutError`` when it ran out of time); an answer with an error status raises the
``APIStatusError`` subclass for its status, or for Gradient's typed 4XX bodies the ``GradientError``
subclass named after the body's ``type``; a success whose body is not what the spec promises
raises ``APIResponseValidationError``. Arguments the spec forbids raise ``ValueError`` before any
request is sent. Messages never contain the credentials the request carried.

The hand-written classes live in ``wrapper._exceptions``; one ``GradientError`` subclass per
error ``type`` of Gradient's spec is generated into ``generated/gradient/exceptions.py``.
"""

from generated.gradient import exceptions as _generated
from generated.gradient.exceptions import *  # noqa: F403

from . import _exceptions
from ._exceptions import *  # noqa: F403

__all__ = sorted(_exceptions.__all__ + _generated.__all__)
