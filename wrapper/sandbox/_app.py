"""The sandbox's ASGI app: both vendors' completion routes, its own ``/_sandbox/`` routes, and stats."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from . import _catalog
from ._faults import Api, Fault, FaultPlan, make_rule, parse_rule
from ._limits import RateLimits
from ._lm import Generation, LanguageModel, Sampling, Step
from ._validate import Invalid, error, request_body


class _Anything(Convertor[str]):
    """Like Starlette's ``path`` convertor, but a line break too: every model id reaches its API's handler."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anything", _Anything())

GRADIENT_STATUS = {
    "bodyParsingError": 400,
    "queryOrPathParsingError": 400,
    "flaggedContent": 400,
    "modelDoesNotSupportGuidance": 400,
    "ragRequiresAutoTemplating": 400,
    "unknownBaseModel": 404,
    "unknownModelAdapter": 404,
    "unknownRagCollection": 404,
    "noRagDocumentsFound": 404,
    "unprocessableContent": 422,
    "failed": 422,
}
"""The HTTP status the sandbox sends with each Gradient error ``type`` (the spec only says 4XX)."""

FAULT_HEADER = "x-sandbox-fault"
_GRADIENT_TEMPERATURE, _SCALE_TEMPERATURE = 0.7, 0.2  # a default Gradient's spec leaves open; Scale's
DEFAULT_MAX_TOKENS: dict[Api, int] = {"gradient": 64, "scale": 100}
"""Max tokens when a request sets none: a default Gradient's spec leaves open; Scale's "LLM Engine" one."""
_STREAM_FAILS_AFTER = 2  # chunks a ``__fail__`` stream sends before its error event


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
        credentials: dict[Api, str | None] | None = None,
        any_model: bool = False,
    ) -> None:
        self.seed = seed
        self.credentials: dict[Api, str | None] = {"gradient": None, "scale": None, **(credentials or {})}
        """The one credential each API accepts (None: any but ``invalid``)."""
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
        catalogs = (("gradient", _catalog.GRADIENT_MODELS), ("scale", _catalog.SCALE_MODELS))
        self.models = {(api, m.id): (m, by_order[m.order]) for api, models in catalogs for m in models}
        self._default_models = {api: self.models[api, models[0].id] for api, models in catalogs}
        self._app = Starlette(
            routes=[
                Route("/api/models/{id:anything}/complete", self._gradient, methods=["POST"]),
                Route("/v4/models/{model_deployment_id:anything}/completions", self._scale, methods=["POST"]),
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
        return JSONResponse(
            {
                "gradient": [
                    {"id": m.id, "guidance": m.guidance, "context": m.context}
                    for m in _catalog.GRADIENT_MODELS
                ],
                "scale": [{"id": m.id, "context": m.context} for m in _catalog.SCALE_MODELS],
            }
        )

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

    # -- shared request handling ---------------------------------------------------------------------

    async def _fault(self, request: Request, api: Api, model: str) -> Fault | None:
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

    async def _apply(self, request: Request, fault: Fault | None, api: Api, stream: bool) -> Response | None:
        """The response a non-stream fault calls for, or None to answer normally."""
        if fault is None:
            return None
        if fault.reset or (fault.cut is not None and not stream):
            return await self._abort(request)
        if fault.status is not None:
            return _fault_status(api, fault)
        if fault.malformed and not stream:
            body = '{"unexpected": true}' if fault.malformed == "shape" else "<html>not json"
            return Response(body, media_type="application/json")
        return None

    def _model(self, api: Api, model_id: str) -> tuple[_catalog.Model, LanguageModel] | None:
        """The model serving ``model_id``: its own, else (``any_model``) the API's first one, else None."""
        known = self.models.get((api, model_id))
        return self._default_models[api] if known is None and self.any_model else known

    def _refused(self, api: Api, sent: str, credential: str, how: str) -> str | None:
        """Why a request with credential ``sent`` (empty: none) gets a 401, or None when it is accepted."""
        if not sent:
            return f"Not authenticated: send {how}"
        accepted = self.credentials[api]
        if sent == _catalog.REJECTED_CREDENTIAL if accepted is None else sent != accepted:
            return f"Not authenticated: {credential} sent was refused"
        return None

    def _admit(
        self, api: Api, credential: str, prompt: str, max_tokens: float | None
    ) -> Response | Callable[[int], None]:
        """Charge a request to its credential's rate limits: a 429 in the API's error shape when it is over
        one, else the function that corrects the token charge with the tokens used once answered."""
        key = (api, credential)
        reserved = DEFAULT_MAX_TOKENS[api] if max_tokens is None else max(0, int(max_tokens))
        estimate = LanguageModel.count(prompt) + reserved
        refusal = self.limits.admit(key, estimate)
        if refusal is None:
            return partial(self.limits.settle, key, estimate)
        self.counter.limited()
        message = (
            f"Rate limit reached: {refusal.per_minute:g} {refusal.limit} per minute; "
            f"retry in {refusal.wait:.3f} s"
        )
        if api == "gradient":
            response = _gradient_error("failed", message, 429)
        else:
            response = JSONResponse({"detail": message}, status_code=429)
        response.headers["retry-after"] = str(math.ceil(refusal.wait))
        response.headers["retry-after-ms"] = str(math.ceil(refusal.wait * 1000))
        return response

    # -- Gradient ------------------------------------------------------------------------------------

    async def _gradient(self, request: Request) -> Response:
        model_id = request.path_params["id"]
        try:
            fault = await self._fault(request, "gradient", model_id)
        except ValueError as exc:
            issue = error((FAULT_HEADER,), "value_error", str(exc), request.headers[FAULT_HEADER])
            return _gradient_error(
                "queryOrPathParsingError", f"Invalid {FAULT_HEADER} header", issues=[issue]
            )
        if answer := await self._apply(request, fault, "gradient", stream=False):
            return answer
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        if refused := self._refused("gradient", token, "the access token", "'Authorization: Bearer <token>'"):
            return _gradient_error("failed", refused, 401)
        if not request.headers.get("x-gradient-workspace-id"):
            return _gradient_error(
                "queryOrPathParsingError",
                "Header x-gradient-workspace-id is required",
                issues=[error(("x-gradient-workspace-id",), "missing", "Field required")],
            )
        if not model_id or "/" in model_id:
            return _gradient_error(
                "queryOrPathParsingError",
                f"Invalid model id {model_id!r}",
                issues=[error(("id",), "string_too_short", "Invalid model id", model_id)],
            )
        try:
            body = request_body("gradient", await request.body())
        except Invalid as exc:
            return _gradient_error("bodyParsingError", "Invalid request body", issues=exc.errors)
        settle = self._admit("gradient", token, body["query"], body.get("maxGeneratedTokenCount"))
        if isinstance(settle, Response):
            return settle
        return self._gradient_complete(model_id, body, settle)

    def _gradient_complete(
        self, model_id: str, body: dict[str, Any], settle: Callable[[int], None]
    ) -> Response:
        known = self._model("gradient", model_id)
        if known is None:
            kind = "unknownModelAdapter" if model_id.endswith(_catalog.ADAPTER_SUFFIX) else "unknownBaseModel"
            return _gradient_error(kind, f"Model {model_id!r} does not exist")
        model, lm = known
        query: str = body["query"]
        if flagged := _catalog.flagged(query):
            return _gradient_error(
                "flaggedContent",
                "The query contains flagged content",
                payload={"flaggedContent": [{"sample": word} for word in flagged]},
            )
        if "guidance" in body and not model.guidance:
            return _gradient_error(
                "modelDoesNotSupportGuidance", f"Model {model_id!r} does not support guidance"
            )
        prompt = query
        if "rag" in body:
            if not body.get("autoTemplate", True):
                return _gradient_error("ragRequiresAutoTemplating", "RAG requires autoTemplate to be true")
            collection = body["rag"]["collectionId"]
            if collection != _catalog.RAG_COLLECTION:
                return _gradient_error(
                    "unknownRagCollection", f"RAG collection {collection!r} does not exist"
                )
            documents = _catalog.retrieve(query)
            if not documents:
                return _gradient_error(
                    "noRagDocumentsFound", "No document in the collection matches the query"
                )
            prompt = "\n\n".join([*documents, query])
        prompt_tokens = lm.count(prompt)
        if prompt_tokens > model.context:
            return _gradient_error(
                "unprocessableContent",
                f"The query has {prompt_tokens} tokens; {model_id!r} takes at most {model.context}",
            )
        if _catalog.FAIL_TRIGGER in query:
            return _gradient_error("failed", "Generation failed")
        if "guidance" in body:
            choice = lm.choose(prompt, body["guidance"]["value"])
            settle(prompt_tokens + lm.count(choice))
            return JSONResponse({"finishReason": "stop", "generatedOutput": choice})
        sampling = _sampling(
            body.get("temperature"),
            body.get("topK"),
            body.get("topP"),
            body.get("maxGeneratedTokenCount") or DEFAULT_MAX_TOKENS["gradient"],
            model.context - prompt_tokens,
            _GRADIENT_TEMPERATURE,
        )
        generation = lm.generate(prompt, sampling, self.rng)
        for _ in generation:
            pass
        settle(prompt_tokens + generation.tokens)
        return JSONResponse({"finishReason": generation.finish_reason, "generatedOutput": generation.text})

    # -- Scale ---------------------------------------------------------------------------------------

    async def _scale(self, request: Request) -> Response:
        model_id = request.path_params["model_deployment_id"]
        try:
            fault = await self._fault(request, "scale", model_id)
        except ValueError as exc:
            return _scale_invalid([error(("header", FAULT_HEADER), "value_error", str(exc))])
        raw = await request.body()
        stream = _wants_stream(raw)
        if answer := await self._apply(request, fault, "scale", stream):
            return answer
        credential = request.headers.get("x-api-key", "")
        if refused := self._refused("scale", credential, "the API key", "the x-api-key header"):
            return JSONResponse({"detail": refused}, status_code=401)
        try:
            body = request_body("scale", raw)
        except Invalid as exc:
            return _scale_invalid(exc.errors)
        settle = self._admit("scale", credential, body["prompt"], body.get("max_tokens"))
        if isinstance(settle, Response):
            return settle
        known = self._model("scale", model_id)
        if known is None:
            return JSONResponse({"detail": f"Model deployment {model_id!r} not found"}, status_code=404)
        model, lm = known
        prompt: str = body["prompt"]
        prompt_tokens = lm.count(prompt)
        room = model.context - prompt_tokens
        max_tokens = int(body.get("max_tokens", min(DEFAULT_MAX_TOKENS["scale"], room)))
        if max_tokens > room:
            msg = (
                f"prompt tokens ({prompt_tokens}) plus max_tokens exceed the context length ({model.context})"
            )
            return _scale_invalid([error(("body", "max_tokens"), "value_error", msg, max_tokens)])
        sampling = _sampling(
            body.get("temperature"),
            body.get("top_k"),
            body.get("top_p"),
            max_tokens,
            room,
            _SCALE_TEMPERATURE,
            body.get("top_logprobs", 1) if body.get("logprobs") else 0,
            tuple(body.get("stop_sequences", ())),
        )
        failing = _catalog.FAIL_TRIGGER in prompt
        if failing and not stream:
            return JSONResponse({"detail": "Generation failed"}, status_code=500)
        generation = lm.generate(prompt, sampling, self.rng)
        if stream:
            pace = fault.pace if fault else 0.0
            events = _scale_events(
                generation, prompt, prompt_tokens, bool(sampling.top_logprobs), failing, pace, settle
            )
            if fault and (fault.cut is not None or fault.malformed):
                events = self._faulty_stream(request, events, fault)
            return StreamingResponse(
                events, media_type="text/event-stream", headers={"cache-control": "no-cache"}
            )
        steps = list(generation)
        settle(prompt_tokens + generation.tokens)
        response: dict[str, Any] = {
            "completions": [[prompt, [generation.text]]],
            "finish_reason": generation.finish_reason,
            "prompt_tokens": prompt_tokens,
            "response_tokens": generation.tokens,
        }
        if sampling.top_logprobs:
            response["choices"] = [{"index": 0, "logprobs": {"content": [_logprob(s) for s in steps]}}]
        return JSONResponse(response)

    async def _faulty_stream(
        self, request: Request, events: AsyncIterator[str], fault: Fault
    ) -> AsyncIterator[str]:
        """``events`` cut after ``fault.cut`` chunks, or replaced by one malformed chunk."""
        if fault.malformed:
            yield "data: {not json\n\n" if fault.malformed == "json" else 'data: {"unexpected": true}\n\n'
            return
        sent = 0
        async for event in events:
            if sent == fault.cut:
                break
            yield event
            sent += 1
        await asyncio.sleep(0)  # let the chunks reach the socket before the connection goes
        await self._abort(request)


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


def _sampling(
    temperature: float | None,
    top_k: float | None,
    top_p: float | None,
    max_tokens: int,
    room: int,
    default_temperature: float,
    top_logprobs: int = 0,
    stop: tuple[str, ...] = (),
) -> Sampling:
    return Sampling(
        max_tokens=max(0, min(int(max_tokens), room)),
        temperature=default_temperature if temperature is None else max(0.0, temperature),
        top_k=int(top_k or 0),
        top_p=1.0 if top_p is None else top_p,
        stop=stop,
        top_logprobs=max(1, min(int(top_logprobs), 20)) if top_logprobs else 0,
    )


def _wants_stream(raw: bytes) -> bool:
    try:
        body = json.loads(raw)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("stream") is True


def _logprob(step: Step) -> dict[str, Any]:
    return {
        "token": step.token,
        "logprob": step.logprob,
        "bytes": list(step.token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in step.top_logprobs
        ],
    }


async def _scale_events(
    generation: Generation,
    prompt: str,
    prompt_tokens: int,
    logprobs: bool,
    failing: bool,
    pace: float,
    settle: Callable[[int], None],
) -> AsyncIterator[str]:
    """One SSE event per generated token, then a final one with the finish reason and token counts.

    ``settle`` gets the tokens used (the prompt's and those generated) when the stream ends, however it ends.
    """
    try:
        for i, step in enumerate(generation):
            if failing and i == _STREAM_FAILS_AFTER:
                yield (
                    "event: error\ndata: "
                    + json.dumps({"detail": "Generation failed", "status_code": 500})
                    + "\n\n"
                )
                return
            chunk: dict[str, Any] = {"completions": [[prompt, [step.delta]]]}
            if logprobs:
                chunk["choices"] = [{"index": 0, "logprobs": {"content": [_logprob(step)]}}]
            yield f"data: {json.dumps(chunk)}\n\n"
            await asyncio.sleep(pace)  # flushes the chunk before the next token is generated
    finally:
        settle(prompt_tokens + generation.tokens)
    last = {
        "completions": [[prompt, [generation.tail]]],
        "finish_reason": generation.finish_reason,
        "prompt_tokens": prompt_tokens,
        "response_tokens": generation.tokens,
    }
    yield f"data: {json.dumps(last)}\n\n"


def _gradient_error(
    kind: str,
    message: str,
    status: int | None = None,
    *,
    issues: list[dict[str, Any]] | None = None,
    payload: dict[str, Any] | None = None,
) -> Response:
    body: dict[str, Any] = {"type": kind, "message": message}
    if kind in ("bodyParsingError", "queryOrPathParsingError"):  # their payload is required
        issues = issues or []
        formatted = "; ".join(f"{'.'.join(map(str, i['loc'])) or 'body'}: {i['msg']}" for i in issues)
        payload = {"validationError": issues, "formattedValidationError": formatted}
    if payload is not None:
        body["payload"] = payload
    return JSONResponse(body, status_code=status or GRADIENT_STATUS[kind])


def _scale_invalid(errors: list[dict[str, Any]]) -> Response:
    return JSONResponse({"detail": errors}, status_code=422)


def _fault_status(api: Api, fault: Fault) -> Response:
    """The error answer for an injected status, shaped as that API would send it."""
    status = fault.status or 500
    message = f"Sandbox fault: status {status}"
    if api == "gradient":
        response = _gradient_error("failed", message, status)
    elif status == 422:
        response = _scale_invalid([error(("body",), "sandbox_fault", message)])
    else:
        response = JSONResponse({"detail": message}, status_code=status)
    response.headers.update(fault.headers())
    return response
