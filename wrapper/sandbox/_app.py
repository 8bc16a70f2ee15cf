"""The sandbox's ASGI app: each API's completion route, its own ``/_sandbox/`` routes, and stats.

Every vendor request takes the same steps here (fault, credential, headers, body, rate limits, model);
what differs between APIs is asked of the request's handler (``_handler.Handler``), one per API.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from contextlib import aclosing
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Protocol

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from . import _catalog
from ._faults import Fault, FaultPlan, make_rule, parse_rule
from ._handler import FAULT_HEADER, Call, Handler
from ._limits import RateLimits
from ._lm import LanguageModel
from ._registry import registry
from ._validate import Invalid, request_body


class _Anything(Convertor[str]):
    """Like Starlette's ``path`` convertor, but a line break too: every model id reaches its API's handler."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anything", _Anything())


class _Connection(Protocol):
    client: tuple[str, int] | None
    transport: asyncio.Transport


@dataclass(frozen=True)
class Stats:
    """Requests to the vendor routes since the last reset: served, in flight now, most in flight at once,
    and answered 429 by the rate limiter (``Sandbox(rpm=..., tpm=...)``; injected faults not counted)."""

    requests: int
    in_flight: int
    max_in_flight: int
    rate_limited: int = 0


@dataclass
class Exchange:
    """One vendor-route request and what the sandbox sent back (``status`` None: no response at all)."""

    method: str
    path: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    fault: Fault | None = None
    aborted: bool = False  # a fault aborted the connection, or the client left: nothing more was sent


class _Counter:
    """Counts vendor-route requests; one stays in flight until its last body byte is handed to the server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = self.in_flight = self.max_in_flight = self.rate_limited = 0

    def enter(self) -> None:
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def limited(self) -> None:
        with self._lock:
            self.rate_limited += 1

    def snapshot(self) -> Stats:
        with self._lock:
            return Stats(self.requests, self.in_flight, self.max_in_flight, self.rate_limited)

    def reset(self) -> None:
        with self._lock:
            self.requests, self.max_in_flight, self.rate_limited = 0, self.in_flight, 0


class SandboxApp:
    """The ASGI app. ``connections`` lists the server's open connections, so faults can abort one."""

    def __init__(
        self,
        seed: int | None = 0,
        *,
        rpm: float | None = None,
        tpm: float | None = None,
        credentials: dict[str, str | None] | None = None,
        any_model: bool = False,
    ) -> None:
        self.seed = seed
        self.handlers = registry()
        """Each API's handler, by name."""
        self.credentials: dict[str, str | None] = {name: None for name in self.handlers}
        self.credentials.update(credentials or {})
        """The one credential each API accepts, by API name (None: any but ``invalid``)."""
        self.any_model = any_model
        """Whether an unknown model id is served by its API's first model instead of a 404."""
        self.rng = random.Random(seed)
        self.limits = RateLimits(rpm, tpm)
        self.faults = FaultPlan(seed)
        self.counter = _Counter()
        self.connections: Callable[[], Iterable[_Connection]] = tuple
        self.exchanges: list[Exchange] | None = None  # a list records every vendor-route exchange
        self._request_ids = itertools.count(1)  # every API response's x-request-id: sandbox-1, sandbox-2, ...
        by_order = {order: LanguageModel.from_corpus(order) for order in (2, 3)}
        self.models = {
            (name, m.id): (m, by_order[m.order]) for name, h in self.handlers.items() for m in h.models
        }
        self._default_models = {name: self.models[name, h.models[0].id] for name, h in self.handlers.items()}
        self._app = Starlette(
            routes=[
                *(Route(h.route, partial(self._serve, h), methods=["POST"]) for h in self.handlers.values()),
                Route("/_sandbox/models", self._list_models, methods=["GET"]),
                Route("/_sandbox/stats", self._stats, methods=["GET", "DELETE"]),
                Route("/_sandbox/faults", self._faults, methods=["GET", "POST", "DELETE"]),
            ],
            exception_handlers={ClientDisconnect: _client_gone},
        )

    def reset(self) -> None:
        """As if just started: no fault queued, counts from zero, full rate budgets, sampling reseeded."""
        self.rng.seed(self.seed)
        self.faults = FaultPlan(self.seed)
        self.counter.reset()
        self.limits = RateLimits(self.limits.rpm, self.limits.tpm)
        if self.exchanges is not None:
            self.exchanges.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/_sandbox/"):
            await self._app(scope, receive, send)
            return
        self.counter.enter()
        done = False
        exchange = None
        if self.exchanges is not None:
            exchange = scope["sandbox.exchange"] = Exchange(scope["method"], scope["path"])
            self.exchanges.append(exchange)

        request_id = f"sandbox-{next(self._request_ids)}"

        async def counted_send(message: Message) -> None:
            nonlocal done
            if message["type"] == "http.response.start":  # as the real services do, for their support
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (b"x-request-id", request_id.encode())],
                }
            if exchange is not None:
                _record(exchange, message)
            if message["type"] == "http.response.body" and not message.get("more_body") and not done:
                done = True
                self.counter.leave()
            await send(message)

        try:
            # Yield once, as a server awaiting its model would: requests that arrived together are then
            # all in flight together, instead of each being answered before the next one starts.
            await asyncio.sleep(0)
            await self._app(scope, receive, counted_send)
        finally:
            if not done:
                self.counter.leave()

    # -- /_sandbox/ ----------------------------------------------------------------------------------

    async def _list_models(self, request: Request) -> Response:
        return JSONResponse({name: [h.listing(m) for m in h.models] for name, h in self.handlers.items()})

    async def _stats(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.counter.reset()
        return JSONResponse(asdict(self.counter.snapshot()))

    async def _faults(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.faults.clear()
        elif request.method == "POST":
            try:
                options = await request.json()
                self.faults.add(parse_rule(options) if isinstance(options, str) else make_rule(**options))
            except (ValueError, TypeError) as exc:
                return JSONResponse({"detail": str(exc)}, status_code=400)
        return JSONResponse([asdict(rule) for rule in self.faults.rules()])

    # -- the vendor routes --------------------------------------------------------------------------

    async def _serve(self, handler: Handler, request: Request) -> Response:
        """Answer one request to ``handler``'s route."""
        api = handler.name
        model_id = request.path_params[handler.model_param]
        try:
            fault = await self._fault(request, api, model_id)
        except ValueError as exc:
            return handler.bad_fault_header(str(exc), request.headers[FAULT_HEADER])
        raw = await request.body()
        stream = handler.wants_stream(raw)
        if answer := await self._apply(request, fault, handler, stream):
            return answer
        credential = handler.credential(request)
        if refused := self._refused(handler, credential):
            return handler.status_error(401, refused)
        if answer := handler.check(request, model_id):
            return answer
        try:
            body = request_body(handler.operation, raw)
        except Invalid as exc:
            return handler.invalid(exc.errors)
        settle = self._admit(
            handler, credential, body[handler.prompt_field], body.get(handler.max_tokens_field)
        )
        if isinstance(settle, Response):
            return settle
        known = self._model(api, model_id)
        if known is None:
            return handler.unknown_model(model_id)
        completed = handler.complete(Call(model_id, *known, body, stream, settle, self.rng))
        if isinstance(completed, Response):
            return completed
        events = self._stream(request, completed, fault)
        return StreamingResponse(
            events, media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    async def _fault(self, request: Request, api: str, model: str) -> Fault | None:
        """The fault for this request (header first, then the queued rules), after its delay."""
        spec = request.headers.get(FAULT_HEADER)
        fault = parse_rule(spec).fault if spec else self.faults.take(api, model)
        if "sandbox.exchange" in request.scope:
            request.scope["sandbox.exchange"].fault = fault
        if fault and fault.delay:
            await asyncio.sleep(fault.delay)
        return fault

    async def _abort(self, request: Request) -> Response:
        """Abort this request's connection (no more bytes, no proper close); the server drops what follows."""
        for connection in list(self.connections()):
            if connection.client == request.scope.get("client"):
                connection.transport.abort()
        if "sandbox.exchange" in request.scope:
            request.scope["sandbox.exchange"].aborted = True
        for _ in range(2):  # let the server notice the lost connection before the app answers
            await asyncio.sleep(0)
        return Response(status_code=204)

    async def _apply(
        self, request: Request, fault: Fault | None, handler: Handler, stream: bool
    ) -> Response | None:
        """The response a non-stream fault calls for, or None to answer normally."""
        if fault is None:
            return None
        if fault.reset or (fault.cut is not None and not stream):
            return await self._abort(request)
        if fault.status is not None:
            response = handler.status_error(fault.status, f"Sandbox fault: status {fault.status}")
            response.headers.update(fault.headers())
            return response
        if fault.malformed and not stream:
            body = '{"unexpected": true}' if fault.malformed == "shape" else "<html>not json"
            return Response(body, media_type="application/json")
        return None

    def _model(self, api: str, model_id: str) -> tuple[_catalog.Model, LanguageModel] | None:
        """The model serving ``model_id``: its own, else (``any_model``) the API's first one, else None."""
        known = self.models.get((api, model_id))
        return self._default_models[api] if known is None and self.any_model else known

    def _refused(self, handler: Handler, sent: str) -> str | None:
        """Why a request with credential ``sent`` (empty: none) gets a 401, or None when it is accepted."""
        if not sent:
            return f"Not authenticated: send {handler.credential_how}"
        accepted = self.credentials[handler.name]
        if sent == _catalog.REJECTED_CREDENTIAL if accepted is None else sent != accepted:
            return f"Not authenticated: {handler.credential_name} sent was refused"
        return None

    def _admit(
        self, handler: Handler, credential: str, prompt: str, max_tokens: float | None
    ) -> Response | Callable[[int], None]:
        """Charge a request to its credential's rate limits: a 429 in the API's error shape when it is over
        one, else the function that corrects the token charge with the tokens used once answered."""
        key = (handler.name, credential)
        reserved = handler.default_max_tokens if max_tokens is None else max(0, int(max_tokens))
        estimate = LanguageModel.count(prompt) + reserved
        refusal = self.limits.admit(key, estimate)
        if refusal is None:
            return partial(self.limits.settle, key, estimate)
        self.counter.limited()
        message = (
            f"Rate limit reached: {refusal.per_minute:g} {refusal.limit} per minute; "
            f"retry in {refusal.wait:.3f} s"
        )
        response = handler.status_error(429, message)
        response.headers["retry-after"] = str(math.ceil(refusal.wait))
        response.headers["retry-after-ms"] = str(math.ceil(refusal.wait * 1000))
        return response

    async def _stream(
        self, request: Request, events: AsyncGenerator[str, None], fault: Fault | None
    ) -> AsyncIterator[str]:
        """A handler's stream of server-sent events, with its fault: one malformed event instead, or the
        events with ``pace`` seconds between them, cut (the connection aborted) after ``cut`` of them,
        stalled after ``stall``, ended after ``end`` (never with the final one), and the framing the
        fault asks for (a BOM, a named event before each, ``[DONE]``, no blank line at the end)."""
        if fault and fault.malformed:
            yield "data: {not json\n\n" if fault.malformed == "json" else 'data: {"unexpected": true}\n\n'
            return
        fault = fault or Fault()
        bom = "\ufeff" if fault.bom else ""  # before the body's first piece, whatever it is
        async with aclosing(_with_last(events)) as numbered:
            sent = 0
            async for event, last in numbered:
                if sent == fault.cut or sent == fault.end or (last and fault.end is not None):
                    break
                waits = [_wait(math.inf, fault.keepalive)] if sent == fault.stall else []
                if sent:  # yields to the loop, as a model generating tokens would
                    waits.append(_wait(fault.pace, fault.keepalive))
                for wait in waits:
                    async for comment in wait:
                        yield bom + comment
                        bom = ""
                if fault.event:
                    yield f"{bom}event: {fault.event}\ndata: {json.dumps({'type': fault.event})}\n\n"
                    bom = ""
                ending = last and fault.unterminated and not fault.done
                yield bom + (event.removesuffix("\n\n") if ending else event)
                bom = ""
                sent += 1
            else:
                if fault.done:
                    yield bom + "data: [DONE]" + ("" if fault.unterminated else "\n\n")
        if fault.cut is not None:
            await asyncio.sleep(0)  # let the events reach the socket before the connection goes
            await self._abort(request)


async def _with_last(events: AsyncGenerator[str, None]) -> AsyncGenerator[tuple[str, bool], None]:
    """Each of ``events`` and whether it is the last one."""
    async with aclosing(events):
        previous: str | None = None
        async for event in events:
            if previous is not None:
                yield previous, False
            previous = event
        if previous is not None:
            yield previous, True


async def _wait(seconds: float, keepalive: float | None) -> AsyncIterator[str]:
    """Wait ``seconds`` (``inf``: until the client leaves), with a keep-alive comment every
    ``keepalive`` seconds of it."""
    if keepalive is None:
        if seconds == math.inf:
            await asyncio.Event().wait()  # the server cancels it when the client leaves
        await asyncio.sleep(seconds)
        return
    while seconds > keepalive:
        await asyncio.sleep(keepalive)
        seconds -= keepalive
        yield ": keep-alive\n\n"
    await asyncio.sleep(seconds)


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client left (e.g. timed out during a delay fault): the server drops this answer."""
    if "sandbox.exchange" in request.scope:
        request.scope["sandbox.exchange"].aborted = True
    return Response(status_code=499)


def _record(exchange: Exchange, message: Message) -> None:
    if exchange.aborted:
        return
    if message["type"] == "http.response.start":
        exchange.status = message["status"]
        exchange.headers = {k.decode(): v.decode() for k, v in message.get("headers", ())}
    elif message["type"] == "http.response.body":
        exchange.body += message.get("body", b"")
