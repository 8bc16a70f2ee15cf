"""``python -m wrapper``: ``complete`` one prompt, ``batch`` a JSONL file resumably, show or empty a
response ``cache``, or run the ``sandbox``.

Exit codes: 0 all done, 1 some prompt failed (or an API error, or a batch stopped because its first
answers all refused it), 2 a usage error, 3 a batch stopped at its budget, 130 interrupted. The
``completion-clients`` console script is the same command line under its own name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Any

from wrapper import Options
from wrapper import apis as _api
from wrapper._cli._batch_command import Batch, describe, run_batch
from wrapper._cli._cache_command import run_cache
from wrapper._cli._inputs import STDIO, InputLineError
from wrapper._cli._parser import ROUTES, build_parser, credentials, flag_params
from wrapper._cli._record import Run, Target, host_of
from wrapper._cli._routes import load_routes

__all__ = ["main"]

OK, FAILED, USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m wrapper") -> int:
    """Run the command line (``prog`` is how it was invoked, for usage); return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sandbox"]:  # all the rest is the sandbox's, --help included
        from wrapper.sandbox.__main__ import main as sandbox_main

        return sandbox_main(argv[1:])
    args = build_parser(prog).parse_args(argv)
    if args.command == "cache":
        return run_cache(args)
    usage: argparse.ArgumentParser = args.command_parser
    if args.command == "batch" and _same_file(args.input, args.output):
        usage.error(
            f"-o/--output {args.output} is the input file {_shown(args.input)} (the same file): "
            "the results must go to another file"
        )
    params = flag_params(args)
    try:
        if args.provider == ROUTES:
            client = _router(args)
            check = _routes_checker(client)
            check(params)
        else:  # the parameters first: their error says more than a missing credential's
            check = _param_checker(args.provider)
            check(params)
            client = _client(args, asynchronous=args.command == "batch")
        batch = _batched(client, args, params) if args.command == "batch" else None
    except ValueError as exc:  # a parameter the client refuses, a missing credential, a bad routes file
        usage.error(_missing_credential(args, exc) or str(exc))
    try:
        if batch is None:
            with client:
                return _complete(client, args, params)
        return asyncio.run(_batch(batch, args, check, _command(prog, argv, args)))
    except BrokenPipeError:  # what reads the results stopped reading (-o - | head): stop, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush can't fail now
        return FAILED
    except KeyboardInterrupt:
        resumable = args.command == "batch" and args.output != STDIO
        print("interrupted" + (": run it again to resume" if resumable else ""), file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:  # an unreadable input, an empty prompt
        print(f"error: {exc}", file=sys.stderr)
        return USAGE


async def _batch(batch: Batch, args: argparse.Namespace, check: Any, command: str) -> int:
    async with batch.client:
        return await run_batch(
            batch,
            args.input,
            args.output,
            check=check,
            show_progress=args.progress,
            retry_failed=args.retry_failed,
            allow_changes=args.allow_changed_settings,
            summary_path=args.summary,
            command=command,
        )


def _batched(client: Any, args: argparse.Namespace, params: dict[str, Any]) -> Batch:
    """The batch the flags ask for: on one model, over a routes file's routes, or a fan-out (several
    models, or ``--fan-out`` over routes), and its run."""
    from wrapper.router import AsyncRouter, Route

    if args.provider == ROUTES:  # a router's limits are its routes'
        targets = [_target(route.name, route.client, route.model, route.params) for route in client.routes]
        run = Run("fan-out" if args.fan_out else "routes", targets, params)
        return Batch(
            run,
            client,
            args.concurrency,
            budget_requests=args.budget_requests,
            budget_tokens=args.budget_tokens,
        )
    models = args.model.split(",")
    for model in models:
        if not model.strip() or models.count(model) > 1:
            raise ValueError(f"{args.model!r}: name each model of a fan-out once, separated by commas")
    targets = [_target(model, client, model) for model in models]
    budget = {"budget_requests": args.budget_requests, "budget_tokens": args.budget_tokens}
    limits = {"limit_store": args.limit_store, "limit_key": args.limit_key}
    if len(models) == 1:
        run = Run("model", targets, params)
        return Batch(run, client, args.concurrency, args.rpm, args.tpm, **limits, **budget)
    # a fan-out: each model a route of its own, paced to the limits given
    router = AsyncRouter(
        [
            Route(client, model, requests_per_minute=args.rpm, tokens_per_minute=args.tpm, **limits)
            for model in models
        ]
    )
    return Batch(Run("fan-out", targets, params), router, args.concurrency, **budget)


def _target(name: str | None, client: Any, model: str, params: Any = None) -> Target:
    return Target(name or model, client.API.name, host_of(client.base_url), model, dict(params or {}))


def _same_file(input_path: str, output_path: str) -> bool:
    """Whether the two are one regular file (a hard link, a symlink, another spelling, standard input or
    output redirected from or to it), both existing."""
    try:
        read = os.fstat(sys.stdin.fileno()) if input_path == STDIO else os.stat(input_path)
        written = os.fstat(sys.stdout.fileno()) if output_path == STDIO else os.stat(output_path)
    except OSError:  # one is missing: the output will be created, a missing input reported later
        return False
    return stat.S_ISREG(read.st_mode) and os.path.samestat(read, written)


def _shown(input_path: str) -> str:
    return f"{STDIO} (standard input)" if input_path == STDIO else input_path


def _missing_credential(args: argparse.Namespace, exc: ValueError) -> str | None:
    """The client's error for a missing credential, as the command line gives one; None for another error."""
    if args.provider == ROUTES:  # a routes file's errors name the route
        return None
    for flag, keyword, env in credentials(args.provider):
        if not getattr(args, keyword) and not os.environ.get(env) and env in str(exc):
            return f"{args.provider} needs a credential: pass {flag} or set the {env} environment variable"
    return None


def _command(prog: str, argv: list[str], args: argparse.Namespace) -> str:
    """This run's command line for the shell, each credential given as a flag shown as its variable."""
    given = [] if args.provider == ROUTES else credentials(args.provider)  # a routes file's stay in it
    shown = {
        value: f'"${env}"' if os.environ.get(env, value) == value else f"'<{keyword.upper()}>'"
        for _, keyword, env in given
        if (value := getattr(args, keyword))
    }  # the variable, unless it holds another credential: then a placeholder to fill in
    words = [prog]
    for word in argv:
        flag, equals, value = word.partition("=")
        if word in shown:
            words.append(shown[word])
        elif equals and value in shown:
            words.append(f"{shlex.quote(flag)}={shown[value]}")
        else:
            words.append(shlex.quote(word))
    return " ".join(words)


def _client(args: argparse.Namespace, *, asynchronous: bool) -> Any:
    """The provider's client (async for a batch) from the flags given, the rest from its env vars."""
    options = {keyword: getattr(args, keyword) for _, keyword, _ in credentials(args.provider)}
    options.update(
        base_url=args.base_url, timeout=args.timeout, max_retries=args.max_retries, cache=args.cache
    )
    options = {name: value for name, value in options.items() if value is not None}
    return _api.get(args.provider).clients()[1 if asynchronous else 0](**options)


def _router(args: argparse.Namespace) -> Any:
    """The async router over the routes of the file given, each client with the flags' timeout and retries."""
    from wrapper.router import AsyncRouter

    options = {"timeout": args.timeout, "max_retries": args.max_retries, "cache": args.cache}
    routes = load_routes(args.model, {k: v for k, v in options.items() if v is not None})
    return AsyncRouter(routes, limit_store=args.limit_store)


def _routes_checker(router: Any) -> Callable[..., None]:
    """A check of parameters (and a prompt) against every route's API, as each route would send them."""

    def check(params: dict[str, Any], prompt: str | None = None) -> None:
        params = _request_params(params)
        for route in router.routes:
            try:
                keywords = route.keywords(params)  # its error names the route
            except TypeError as exc:
                raise InputLineError(str(exc)) from None
            try:
                route.client.API.check(keywords, prompt)
            except (TypeError, ValueError) as exc:
                raise InputLineError(f"route {route.name!r}: {exc}") from None

    return check


def _param_checker(provider: str) -> Callable[..., None]:
    """A check of parameters (and a prompt) against the provider's rules, as the client makes it before
    sending."""
    api = _api.get(provider)

    def check(params: dict[str, Any], prompt: str | None = None) -> None:
        try:
            api.check(_request_params(params), prompt)
        except (TypeError, ValueError) as exc:
            raise InputLineError(str(exc)) from None

    return check


def _request_params(params: dict[str, Any]) -> dict[str, Any]:
    r"""The request's parameters among ``--param``\ s (or an input line's), the request options among them
    (``--param deadline=30``) checked as a call checks them: an ``InputLineError`` naming a bad one."""
    try:
        return Options().split(params)[0]
    except ValueError as exc:
        raise InputLineError(str(exc)) from None


def _complete(client: Any, args: argparse.Namespace, params: dict[str, Any]) -> int:
    from wrapper.batch import completion_fields
    from wrapper.errors import APIError

    try:
        if args.stream:
            for chunk in client.stream(args.model, args.prompt, **params):
                print(chunk.text, end="", flush=True)
            print()
        elif args.json:
            completion = client.complete(args.model, args.prompt, **params)
            print(json.dumps({"index": 0, **completion_fields(completion)}))
        else:
            print(client.complete(args.model, args.prompt, **params).text)
    except APIError as exc:
        print(f"error: {describe(exc)}", file=sys.stderr)
        return FAILED
    return OK
