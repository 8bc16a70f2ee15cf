"""The sandbox's ASGI app: each API's completion route, its own ``/_sandbox/`` routes, and stats.

Every vendor request takes the same steps here (body, fault, credential, headers, body validation, rate
limits, model); what differs between APIs is asked of the request's handler (``_handler.Handler``), one
per API. Every request becomes an ``Exchange`` (``_records``), logged with ``log=True``; those to the APIs'
routes are counted in the stats, given an ``x-request-id``, and kept with ``record=True``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from contextlib import aclosing
from dataclasses import asdict
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
from ._guards import CLIENT_TIMEOUT, MAX_BODY, BodyRefused, read_body, same
from ._handler import FAULT_HEADER, Call, Handler
from ._limits import RateLimits, checked_limit
from ._lm import LanguageModel
from ._log import enable, logger
from ._records import Counter, Exchange, redacted
from ._registry import registry
from ._validate import Invalid, parse_json, request_body

_REQUEST_ID_HEADERS = ("idempotency-key", "x-request-id")
"""The request headers that identify a call and its retries, for an ``x-sandbox-fault`` header's count."""


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
        max_body: int = MAX_BODY,
        client_timeout: float = CLIENT_TIMEOUT,
        log: bool = False,
    ) -> None:
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
            raise ValueError(f"max_body must be a whole number of bytes >= 1, not {max_body!r}")
        self.max_body = max_body
        """The largest request body read, in bytes; a larger one is answered 413."""
        self.client_timeout = checked_limit("client_timeout", client_timeout) or CLIENT_TIMEOUT
        """Seconds a client has to send a request's head, then its body (``_server`` closes the connection
        of a slow head; a slow body is answered 408)."""
        self.log = log
        """Whether each request is logged (``wrapper.sandbox._log``)."""
        if log:
            enable()
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
        self.counter = Counter()
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
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.monotonic()
        exchange = scope["sandbox.exchange"] = Exchange(scope["method"], scope["path"])
        vendor = not scope["path"].startswith("/_sandbox/")  # the APIs' routes: counted, maybe recorded
        if vendor:
            exchange.request_id = f"sandbox-{next(self._request_ids)}"
            generation = self.counter.enter()
        exchanges = self.exchanges if vendor else None
        recorded = exchanges is not None
        if exchanges is not None:
            exchange.request_headers = redacted(scope["headers"])
            exchanges.append(exchange)
        answered = False

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not answered:
                exchange.aborted = True  # the client left before the end of the answer
            elif message["type"] == "http.request" and recorded:
                exchange.request_body += message.get("body", b"")
            return message

        async def watched_send(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and vendor:  # as the real services do, for support
                assert exchange.request_id is not None
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (b"x-request-id", exchange.request_id.encode())],
                }
            if not exchange.aborted:
                _record(exchange, message, recorded)
            if message["type"] == "http.response.body" and not message.get("more_body") and not answered:
                answered = True
                if vendor:
                    self.counter.leave(generation)
            await send(message)

        try:
            if vendor:
                # Yield once, as a server awaiting its model would: requests that arrived together are then
                # all in flight together, instead of each being answered before the next one starts.
                await asyncio.sleep(0)
            await self._app(scope, watched_receive, watched_send)
        finally:
            if vendor and not answered:
                self.counter.leave(generation)
            exchange.duration = time.monotonic() - started
            if self.log:
                logger.info(exchange.log_line())

    # -- /_sandbox/ ----------------------------------------------------------------------------------

    async def _list_models(self, request: Request) -> Response:
        return JSONResponse({name: [h.listing(m) for m in h.models] for name, h in self.handlers.items()})

    async def _stats(self, request: Request) -> Response:
        if refused := self._control_refused(request):
            return refused
        if request.method == "DELETE":
            self.counter.reset()
        return JSONResponse(asdict(self.counter.snapshot()))

    async def _faults(self, request: Request) -> Response:
        if refused := self._control_refused(request):
            return refused
        if request.method == "DELETE":
            self.faults.clear()
        elif request.method == "POST":
            try:
                options = parse_json(await read_body(request, self.max_body, self.client_timeout))
                self.faults.add(parse_rule(options) if isinstance(options, str) else make_rule(**options))
            except BodyRefused as exc:
                return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=exc.headers)
            except Invalid as exc:
                return JSONResponse({"detail": f"not JSON: {exc.errors[0]['ctx']['error']}"}, status_code=400)
            except (ValueError, TypeError) as exc:
                return JSONResponse({"detail": str(exc)}, status_code=400)
        return JSONResponse([asdict(rule) for rule in self.faults.rules()])

    def _control_refused(self, request: Request) -> Response | None:
        """The 401 of a request to a ``/_sandbox/`` route that changes or reports on the sandbox, when the
        sandbox takes only given credentials and the request sends none of them; else None."""
        given = [(h, accepted) for name, h in self.handlers.items() if (accepted := self.credentials[name])]
        if not given or any(same(h.credential(request), accepted) for h, accepted in given):
            return None
        how = " or ".join(h.credential_how for h, _ in given)
        detail = f"Not authenticated: the sandbox's own routes take a credential it was started with ({how})"
        return JSONResponse({"detail": detail}, status_code=401)

    # -- the vendor routes --------------------------------------------------------------------------

    async def _serve(self, handler: Handler, request: Request) -> Response:
        """Answer one request to ``handler``'s route."""
        api = handler.name
        model_id = request.path_params[handler.model_param]
        try:
            raw = await read_body(request, self.max_body, self.client_timeout)
        except BodyRefused as exc:
            response = handler.status_error(exc.status, str(exc))
            response.headers.update(exc.headers)
            return response
        credential = handler.credential(request)
        refused = self._refused(handler, credential)
        header = request.headers.get(FAULT_HEADER)
        if header is not None and refused and self.credentials[api] is not None:
            return handler.status_error(401, refused)  # with given credentials, only their holders set faults
        try:
            fault = self._fault(request, api, model_id)
        except ValueError as exc:
            return handler.bad_fault_header(str(exc), header or "")
        if fault and fault.delay:
            await _sleep_unless_gone(request, fault.delay)
        stream = handler.wants_stream(raw)
        if answer := await self._apply(request, fault, handler, stream):
            return answer
        if refused:
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

    def _fault(self, request: Request, api: str, model: str) -> Fault | None:
        """The fault for this request: its header's (``ValueError`` for a header that is not a fault), else
        the queued rules'."""
        spec = request.headers.get(FAULT_HEADER)
        if spec is None:
            fault = self.faults.take(api, model)
        else:
            request_id = next(filter(None, map(request.headers.get, _REQUEST_ID_HEADERS)), "")
            fault = self.faults.take_header(spec, api, model, request_id)
        request.scope["sandbox.exchange"].fault = fault
        return fault

    async def _abort(self, request: Request) -> Response:
        """Abort this request's connection (no more bytes, no proper close); the server drops what follows."""
        for connection in list(self.connections()):
            if connection.client == request.scope.get("client"):
                connection.transport.abort()
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
        if sent == _catalog.REJECTED_CREDENTIAL if accepted is None else not same(sent, accepted):
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


async def _sleep_unless_gone(request: Request, seconds: float) -> None:
    """Wait ``seconds`` (a ``delay`` fault), or raise ``ClientDisconnect`` as soon as the client leaves
    (its body has been read: the next message is the disconnect)."""
    try:
        async with asyncio.timeout(seconds):
            while (await request.receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return
    raise ClientDisconnect


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client left (e.g. timed out during a delay fault): the server drops this answer."""
    return Response(status_code=499)


def _record(exchange: Exchange, message: Message, recorded: bool) -> None:
    """Note what ``message`` sends in ``exchange``: its status, and when ``recorded``, headers and body."""
    if message["type"] == "http.response.start":
        exchange.status = message["status"]
        if recorded:
            exchange.headers = {k.decode(): v.decode() for k, v in message.get("headers", ())}
    elif message["type"] == "http.response.body" and recorded:
        exchange.body += message.get("body", b"")
