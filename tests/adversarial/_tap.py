"""An httpx transport that forwards to another one, adding headers and recording every exchange."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx


@dataclass
class Exchange:
    """One request sent through a ``Tap``: its response's status and headers, or the error instead of one."""

    request: httpx.Request
    status: int | None = None
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    error: Exception | None = None


class Tap(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Adds ``extra_headers`` to each request, records it and its answer, and lets ``inner`` serve it."""

    def __init__(
        self,
        inner: httpx.BaseTransport | httpx.AsyncBaseTransport,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.inner = inner
        self.extra_headers = dict(extra_headers or {})
        self.exchanges: list[Exchange] = []

    def _record(self, request: httpx.Request) -> Exchange:
        request.headers.update(self.extra_headers)
        self.exchanges.append(Exchange(request))
        return self.exchanges[-1]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(self.inner, httpx.BaseTransport)
        exchange = self._record(request)
        try:
            response = self.inner.handle_request(request)
        except Exception as exc:
            exchange.error = exc
            raise
        exchange.status, exchange.headers = response.status_code, response.headers
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(self.inner, httpx.AsyncBaseTransport)
        exchange = self._record(request)
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            exchange.error = exc
            raise
        exchange.status, exchange.headers = response.status_code, response.headers
        return response

    def close(self) -> None:
        if isinstance(self.inner, httpx.BaseTransport):
            self.inner.close()

    async def aclose(self) -> None:
        if isinstance(self.inner, httpx.AsyncBaseTransport):
            await self.inner.aclose()
