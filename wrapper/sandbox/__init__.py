"""Both completion APIs on localhost, answered by a tiny real language model: develop and test offline.

``python -m wrapper.sandbox`` serves Gradient at ``http://HOST:PORT/api`` and Scale GP at
``http://HOST:PORT``; in Python, ``with Sandbox() as sb:`` runs it on a free port in a background
thread::

    with Sandbox(seed=0) as sb:
        scale = Scale(api_key="k", account_id="a", base_url=sb.scale_base_url)
        sb.inject(status=429, retry_after=1, count=2, api="scale")   # the next two Scale requests
        ...

Text comes from a word-level trigram/bigram model trained at start-up on Alice's Adventures in
Wonderland, chapters I-II (``corpus.txt``). Sampling honours temperature (0 is greedy), top-k, top-p,
max tokens (finish reason ``length``; ``stop`` at the end of a paragraph or a stop sequence), stop
sequences, guidance (the most likely choice) and Scale's logprobs; ``seed`` makes it reproducible.
Models: Gradient ``nous-hermes2`` (guidance), ``llama2-7b-chat`` (no guidance) and the adapter
``alice-adapter_model_adapter``; Scale ``llama-3-8b-instruct`` and ``mistral-7b-instruct``; RAG
collection ``wonderland``. Error triggers: an unknown model id, guidance on ``llama2-7b-chat``, a
blocklisted word (``contraband``, ``explosives``, ``malware``), ``__fail__`` in the prompt, a prompt
over the context, a negative token count (even where the spec states no bound), RAG with
``autoTemplate: false`` or no matching document, the credential ``invalid``.
Request bodies are validated against the normalised specs (``generated/<api>/spec.json``), so a
regenerated spec's fields and bounds apply at once. In pytest, the plugin ``wrapper.pytest_plugin``
provides ``sandbox`` and client fixtures.

Faults (``Sandbox.inject``, ``POST /_sandbox/faults``, ``--fault``, or one request's ``x-sandbox-fault``
header): ``status=429;retry-after=1``, ``retry-after-ms=250``, ``delay=2``, ``pace=0.1`` (between stream
chunks), ``cut=3`` (abort a stream after 3 chunks; a plain request is reset), ``reset``,
``malformed=json|shape``, and what a stream's body may do: ``stall=2`` (nothing after 2 chunks),
``keepalive=0.5`` (comments while waiting), ``end=2`` (ends without its final chunk), ``event=ping``,
``bom``, ``done`` (``data: [DONE]``), ``unterminated``; selected by ``count=N`` (default 1),
``rate=0.2`` (seeded), ``api=gradient|scale``, ``model=ID``. Queued rules compose: each one matching a
request fires on it (the first queued wins a key two of them set). A header's ``count=N`` hits the first
N requests carrying it with the same ``idempotency-key`` or ``x-request-id`` (a call and its retries).
Credentials: any is accepted but ``invalid`` (401), unless ``Sandbox(api_key=..., access_token=...)``
(``--api-key``, ``--access-token``) names the only one each API takes; ``/_sandbox/faults`` and
``/_sandbox/stats`` then want one of those too. ``Sandbox(any_model=True)`` (``--any-model``) serves an
unknown model id with its API's first model instead of a 404.
Bad clients: a body over ``max_body`` bytes (1 MiB; ``--max-body``) is answered 413 unread; a request
head not sent whole within ``client_timeout`` seconds (10; ``--client-timeout``) closes the connection,
a body not sent whole within it after the head is answered 408; a body that is not JSON (``NaN``,
``Infinity``, nesting deeper than 64 levels) gets its API's validation error.
``Sandbox(log=True)`` (``--log``) logs a line per request; ``Sandbox(record=True)`` keeps each
``Exchange`` in ``exchanges``; ``Sandbox.environ()`` gives the ``SGP_*``/``GRADIENT_*`` variables that
point clients built from the environment at it.
Rate limits (``Sandbox(rpm=60, tpm=10_000)``, ``--rpm``/``--tpm``) apply per credential (Scale's
``x-api-key``, Gradient's bearer token), paced per second as real services do: each credential's
budget holds a second's share of the per-minute limit and refills continuously. A request costs the
prompt's tokens plus its max tokens (or the sandbox's default) at admission, corrected to prompt plus
generated tokens afterwards; one over a limit gets 429 in the API's error shape, with ``Retry-After``
(whole seconds, rounded up) and ``retry-after-ms``.
``Sandbox.stats()`` (or ``GET /_sandbox/stats``) counts requests, the most in flight at once, and the
429s the rate limiter sent.
The details, with each Gradient error's status: ``python -m wrapper.sandbox --help`` (``HELP``).
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, Self

import uvicorn

from wrapper import apis as _api

from . import _catalog
from ._app import SandboxApp
from ._faults import Fault, make_rule, parse_rule
from ._faults import __doc__ as _FAULTS_DOC
from ._guards import CLIENT_TIMEOUT, MAX_BODY
from ._handler import FAULT_HEADER
from ._records import Exchange, Stats
from ._registry import registry
from ._server import listen, server
from ._validate import MAX_DEPTH

__all__ = ["HELP", "Exchange", "Fault", "Sandbox", "Stats", "serve"]


def _help() -> str:
    handlers = registry().values()
    apis = "\n\n".join(handler.help() for handler in handlers)
    flags = " / ".join(f"{h.checked.flag} {h.credential_metavar}" for h in handlers)
    keywords = ", ".join(f"{h.checked.keyword}=..." for h in handlers)
    per_credential = ", ".join(f"{h.title}'s {h.credential_help}" for h in handlers)
    default_max = ", ".join(f"{h.title} {h.default_max_tokens}" for h in handlers)
    faults = (_FAULTS_DOC or "").split("\n\n", 1)[1]
    return f"""\
{apis}

Every API: a missing credential, or {_catalog.REJECTED_CREDENTIAL!r} -> 401. With {flags}
(Sandbox({keywords})), that is the only credential accepted; any other gets 401
saying the credential sent was refused.
With --any-model (Sandbox(any_model=True)), any other model id is served by its API's first model above.

Rate limits (--rpm N, --tpm N; Sandbox(rpm=..., tpm=...)) apply per credential
({per_credential}), paced per second: each credential's budget holds a second's
share of the per-minute limit, refilled continuously. A request costs its prompt's tokens plus its max
tokens (default: {default_max}) at admission, corrected to prompt plus generated tokens once
answered; a request over budget gets 429 in the API's error shape, with Retry-After (whole seconds,
rounded up) and retry-after-ms. GET /_sandbox/stats counts these 429s as rate_limited.

Bad clients: a request body over --max-body bytes (default {MAX_BODY}) is answered 413 before it is
read; a client that has not sent a request's head {CLIENT_TIMEOUT:g} s (--client-timeout) after connecting
or after its last answer has its connection closed, and one whose body is not whole that long after its
head is answered 408. A body that is not JSON (NaN, Infinity, nesting deeper than {MAX_DEPTH} levels) gets
the API's validation error.

Fault injection: header `{FAULT_HEADER}: status=429;retry-after=1` (this request), POST /_sandbox/faults
with JSON {{"status": 503, "count": 2, "api": "scale"}} (DELETE clears), Sandbox.inject(...), or
--fault 'status=503;count=2' (repeatable) at start.
{faults}
Sandbox routes: GET /_sandbox/models, GET|DELETE /_sandbox/stats, GET|POST|DELETE /_sandbox/faults
(with {flags}, the last two take only that credential, sent as its API takes it).
--log prints a line per request to stderr: method, path, status, seconds, fault and request id.
"""


def _plain(text: str) -> str:
    """``text`` with the docstrings' ``literal`` markup taken off, for a terminal."""
    return re.sub(r"``(.+?)``", r"\1", text)


HELP = _plain(_help())
"""What ``--help`` prints after the options: models, RAG collection, triggers, fault injection."""


def serve(
    host: str = "127.0.0.1",
    port: int = 3026,
    seed: int | None = 0,
    *,
    rpm: float | None = None,
    tpm: float | None = None,
    api_key: str | None = None,
    access_token: str | None = None,
    any_model: bool = False,
    max_body: int = MAX_BODY,
    client_timeout: float = CLIENT_TIMEOUT,
    log: bool = False,
    faults: Iterable[str] = (),
) -> None:
    """Serve the sandbox in the foreground until interrupted, printing where once the port is bound.

    The options are ``Sandbox``'s; ``faults`` are rules (``"status=503;count=2"``) queued at start.
    ``ValueError`` for a port out of range, ``OSError`` (naming the address) when the port can't be bound.
    """
    app = _app(
        api_key,
        access_token,
        seed=seed,
        rpm=rpm,
        tpm=tpm,
        any_model=any_model,
        max_body=max_body,
        client_timeout=client_timeout,
        log=log,
    )
    for rule in faults:
        app.faults.add(parse_rule(rule))
    uvicorn_server = server(app, host, port)
    with listen(host, port) as listener, _interrupt_stops(uvicorn_server) as interrupted:
        url = "http://{}:{}".format(*listener.getsockname()[:2])
        where = ", ".join(f"{h.title} at {url}{h.api.sandbox_path}" for h in registry().values())
        print(f"Sandbox: {where}", flush=True)
        uvicorn_server.run(sockets=[listener])
    if interrupted:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _interrupt_stops(server: uvicorn.Server) -> Iterator[list[int]]:
    """Ctrl-C (SIGINT) stops ``server`` whenever it comes, before its loop starts too (where Python's own
    handler would raise ``KeyboardInterrupt`` between creating the server's coroutine and running it);
    the list it gives holds the signal once one came."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield []
        return
    interrupted: list[int] = []

    def stop(signum: int, frame: object) -> None:
        interrupted.append(signum)
        server.should_exit = True

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _app(api_key: str | None, access_token: str | None, **options: Any) -> SandboxApp:
    """The app of ``serve`` and ``Sandbox``, taking only ``api_key``/``access_token`` when given."""
    given = {"api_key": api_key, "access_token": access_token}
    for option, value in given.items():
        if value is not None and (not value or value.strip() != value):
            raise ValueError(f"{option} must be a non-empty string without surrounding spaces, not {value!r}")
    credentials = {name: given.get(handler.checked.keyword) for name, handler in registry().items()}
    return SandboxApp(credentials=credentials, **options)


class Sandbox:
    """The sandbox on a free port of 127.0.0.1, in a background thread: ``with Sandbox() as sb: ...``.

    ``rpm``/``tpm`` limit requests and tokens per minute for each credential (None: no limit); a request
    over a limit is answered 429 with ``Retry-After`` and ``retry-after-ms``. ``api_key`` (Scale) and
    ``access_token`` (Gradient) make that the only credential accepted (None: any but ``invalid``), on
    the APIs' routes and on the sandbox's own ``/_sandbox/faults`` and ``/_sandbox/stats``;
    ``any_model=True`` serves an unknown model id with the API's first model instead of a 404 (for
    placeholder ids such as the vendors' SDK tests use). ``record=True`` keeps every exchange in
    ``exchanges``; ``log=True`` logs a line per request (logger ``wrapper.sandbox``, INFO; to stderr
    when nothing else shows it). A request body over ``max_body`` bytes is answered 413 unread; a client
    that takes over ``client_timeout`` seconds to send a request's head has its connection closed, and
    one that slow with its body is answered 408.
    """

    def __init__(
        self,
        *,
        seed: int | None = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = False,
        log: bool = False,
        rpm: float | None = None,
        tpm: float | None = None,
        api_key: str | None = None,
        access_token: str | None = None,
        any_model: bool = False,
        max_body: int = MAX_BODY,
        client_timeout: float = CLIENT_TIMEOUT,
    ) -> None:
        self.app = _app(
            api_key,
            access_token,
            seed=seed,
            rpm=rpm,
            tpm=tpm,
            any_model=any_model,
            max_body=max_body,
            client_timeout=client_timeout,
            log=log,
        )
        if record:
            self.app.exchanges = []
        self._host, self._port = host, port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (only while running)."""
        if self._socket is None:
            raise RuntimeError("the sandbox is not running")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def base_url(self, api: str) -> str:
        """The ``base_url`` of the clients of the API named ``api`` (only while running)."""
        return self.url + _api.get(api).sandbox_path

    @property
    def gradient_base_url(self) -> str:
        """The Gradient client's ``base_url``: ``base_url("gradient")``."""
        return self.base_url("gradient")

    @property
    def scale_base_url(self) -> str:
        """The Scale client's ``base_url``: ``base_url("scale")``."""
        return self.base_url("scale")

    def start(self) -> Self:
        """Bind the port and serve until ``stop``; returns once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the sandbox is already running")
        self._socket = listen(self._host, self._port)
        self._server = server(self.app, self._host, self._port)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="wrapper-sandbox", daemon=True
        )
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                self.stop()
                raise RuntimeError("the sandbox server failed to start")
            self._thread.join(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def inject(self, spec: str | None = None, /, **options: Any) -> None:
        """Queue a fault: ``"status=429;retry-after=1;count=2"`` or keywords (``status=429, retry_after=1``).

        Keys: status, retry_after, retry_after_ms, delay, pace, cut, reset, malformed ("json"|"shape"),
        a stream's stall, keepalive, end, event, bom, done and unterminated, count (default 1), rate,
        api ("gradient"|"scale"), model. See ``HELP``.
        """
        self.app.faults.add(parse_rule(spec) if spec is not None else make_rule(**options))

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        self.app.faults.clear()

    def environ(self, credential: str = "sandbox") -> dict[str, str]:
        """The environment variables that point clients built from the environment (``Scale()``,
        ``Gradient()``, ``python -m wrapper``) at this sandbox: each API's base URL and credentials (the
        one the sandbox takes, where it was given one; else ``credential``). Only while running."""
        env = {}
        for name, handler in registry().items():
            env[handler.api.base_url_env] = self.base_url(name)
            for each in handler.api.credentials:
                accepted = self.app.credentials[name] if each == handler.checked else None
                env[each.env] = accepted or credential
        return env

    @property
    def exchanges(self) -> list[Exchange]:
        """Every request to the APIs' routes since the last reset, in order of arrival, with what the sandbox
        sent back (only with ``record=True``)."""
        if self.app.exchanges is None:
            raise RuntimeError("create the sandbox with record=True to record exchanges")
        return self.app.exchanges

    def stats(self) -> Stats:
        """Requests served, in flight now, the most in flight at once, and 429s sent by the rate limiter,
        since the last reset."""
        return self.app.counter.snapshot()

    def reset_stats(self) -> None:
        """Start counting afresh."""
        self.app.counter.reset()

    def reset(self) -> None:
        """Back to how it started: no fault queued (nor any ``x-sandbox-fault`` header's count kept), stats
        and recorded exchanges cleared (requests still being answered count in neither), every rate budget
        full, and sampling reseeded, so what follows answers as a fresh sandbox would."""
        self.app.reset()
