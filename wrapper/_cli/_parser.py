"""The command line's grammar: ``complete`` and ``batch`` per provider, ``cache`` and ``sandbox``."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import math
import textwrap
from collections.abc import Callable
from typing import Any

from wrapper import apis as _api
from wrapper._cli._batch_command import BUDGET_REACHED, REFUSALS_TO_STOP
from wrapper._cli._cache_command import add_cache_parser
from wrapper._cli._routes import ROUTES_HELP

__all__ = ["ROUTES", "build_parser", "credentials", "flag_params"]

ROUTES = "routes"
"""``batch``'s provider word for a batch over the routes of a file."""


def build_parser(prog: str = "python -m wrapper") -> argparse.ArgumentParser:
    """The command line's parser; each provider's subcommand parser is its namespace's ``command_parser``.

    ``COMMAND --help`` shows the command's own options and each API's (``COMMAND API --help`` is one
    API's whole help), and the top ``--help`` ends with the usage of each command.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Gradient and Scale GP completions from the shell.",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the usages in the epilog, line by line
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    usages = []
    for name, summary, description, add_own in (
        ("complete", "complete one prompt and print the text", None, _complete_args),
        ("batch", "complete every prompt of a JSONL file into another, resumably", _BATCH, _batch_args),
    ):
        overview = _overview(f"{prog} {name}", description, add_own)
        command = commands.add_parser(name, help=summary, add_help=False)
        command.add_argument("-h", "--help", action=_Overview, overview=overview, help="show this help, exit")
        providers = command.add_subparsers(dest="provider", required=True, metavar=_APIS)
        for api in _api.NAMES:
            sub = providers.add_parser(api, help=f"call {api}", description=description)
            sub.set_defaults(command_parser=sub)  # its usage, for the errors found after parsing
            sub.add_argument("model", help=_api.get(api).model_help + (_FAN_OUT if name == "batch" else ""))
            add_own(sub)
            _client_args(sub, api)
            _param_args(sub, api)
        if name == "batch":
            _routes_parser(providers)
        usages.append(_unlabelled(overview.format_usage()))
    usages.append(f"  {prog} " + add_cache_parser(commands))
    sandbox = commands.add_parser(
        "sandbox", help="serve both APIs locally (python -m wrapper.sandbox)", add_help=False
    )
    sandbox.add_argument("args", nargs=argparse.REMAINDER, help="passed on to the sandbox")
    parser.epilog = (
        f"usage of each command ({prog} COMMAND --help explains it, with each API's options):\n"
        + "".join(usages)
        + f"  {prog} sandbox [options]: {prog} sandbox --help lists them\n"
    )
    return parser


_APIS = "{" + ",".join(_api.NAMES) + "}"
_FAN_OUT = "; several, separated by commas, get every prompt each (a fan-out)"
_WIDTH = 78  # of a description the help prints as it is (next to usages that must keep their lines)
_BATCH = (
    "Complete every prompt of INPUT.jsonl into OUTPUT.jsonl; run the same command again to resume. "
    f"If the first {REFUSALS_TO_STOP} answers are all refusals (401, 403 or 404: a wrong credential or "
    "model), the batch stops without writing them, so that the same command sends them again once "
    "the cause is fixed. 'batch routes ROUTES.json INPUT.jsonl -o OUTPUT.jsonl' spreads the prompts "
    "over the routes of a file instead, each paced to its own limits (batch routes --help); several "
    "models separated by commas, or --fan-out with routes, send every prompt to each. Exit codes: 0 all "
    f"done, 1 some failed, 2 a usage error, {BUDGET_REACHED} stopped at its budget, 130 interrupted."
)


def _routes_parser(providers: Any) -> None:
    """``batch routes ROUTES.json ...``: a batch over the routes of a file (``wrapper.router``)."""
    sub = providers.add_parser(
        ROUTES,
        help="spread the prompts over the routes of a file",
        description="Complete every prompt of INPUT.jsonl into OUTPUT.jsonl over the routes of ROUTES.json, "
        "each paced to its own limits, a failing one's prompts sent to the others; run it again to resume. "
        "Each result line names its route. With --fan-out, every prompt goes to each route instead.",
    )
    sub.set_defaults(command_parser=sub)
    sub.add_argument("model", metavar="ROUTES.json", help=ROUTES_HELP)
    _batch_args(sub, limits=False)
    sub.add_argument(
        "--fan-out",
        action="store_true",
        help="send every prompt to each route (to compare them): one result per prompt and route, naming it "
        "as its target; each route keeps its own limits and retries on itself",
    )
    group = sub.add_argument_group("connection (of every route's client)")
    group.add_argument("--timeout", type=float, metavar="SECONDS", help="per request")
    group.add_argument(
        "--max-retries", type=_natural, metavar="N", help="passes over the routes after the first (2)"
    )
    group.add_argument("--cache", metavar="PATH|URL", help=CACHE_HELP + " (for every route)")
    params = sub.add_argument_group("generation parameters (defaults for every line)")
    params.add_argument(
        "--max-tokens", type=_integer, metavar="N", help="tokens to generate at most, on every API"
    )
    params.add_argument("--temperature", type=float, metavar="T")
    params.add_argument("--top-k", type=_integer, metavar="K")
    params.add_argument("--top-p", type=float, metavar="P")
    params.add_argument(
        "--param",
        action="append",
        type=_key_value,
        default=[],
        metavar="NAME=VALUE",
        help="any other parameter every route's API takes; VALUE is JSON, or else a string (repeatable)",
    )


def _overview(
    prog: str, description: str | None, add_own: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """What ``COMMAND --help`` shows (a parser for the help alone): the command's own arguments
    explained, then the usage of each API's connection and generation options."""
    apis = []
    for api in _api.NAMES:
        options = argparse.ArgumentParser(prog=api, add_help=False)
        _client_args(options, api)
        _param_args(options, api)
        apis.append(_unlabelled(options.format_usage()))
    overview = argparse.ArgumentParser(
        prog=f"{prog} {_APIS}",
        description=description and textwrap.fill(description, width=_WIDTH),
        epilog=f"each API's connection and generation options ({prog} API --help explains them):\n"
        + "".join(apis),
        formatter_class=argparse.RawDescriptionHelpFormatter,  # the usages in the epilog, line by line
    )
    models = "; ".join(f"{api}: {_api.get(api).model_help}" for api in _api.NAMES)
    fan_out = _FAN_OUT if add_own is _batch_args else ""
    overview.add_argument("model", help=f"the model ({models}){fan_out}")
    add_own(overview)
    return overview


class _Overview(argparse.Action):
    """``COMMAND -h``: print the command's overview for every API, and exit."""

    def __init__(self, option_strings: list[str], dest: str, *, overview: argparse.ArgumentParser, help: str):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.overview = overview

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        self.overview.print_help()
        parser.exit()


def _unlabelled(usage: str) -> str:
    """A usage without its ``usage:`` label, indented two spaces, its lines still aligned."""
    return textwrap.indent(textwrap.dedent(usage.replace("usage: ", " " * len("usage: "), 1)), "  ")


def _version() -> str:
    try:
        return importlib.metadata.version("completion-clients")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def _complete_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", help="the text to complete")
    parser.add_argument("--stream", action="store_true", help="print the text as it is generated")
    parser.add_argument("--json", action="store_true", help="print the result as a JSON line, as batch does")


def _batch_args(parser: argparse.ArgumentParser, *, limits: bool = True) -> None:
    parser.add_argument(
        "input",
        metavar="INPUT.jsonl",
        help='one {"prompt": ..., "id": ..., params...} per line; "id" (a string or an integer, optional) is '
        "copied to the result and resume matches by it; a line without one is matched by its position (and "
        "keeps that result once given an id); read up to its size at start; blank lines are not sent; "
        "- is standard input, read to its end",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUTPUT.jsonl",
        required=True,
        help="results (not the input file); re-run to resume; - is standard output, which keeps nothing to "
        "resume from (every run sends every input)",
    )
    parser.add_argument(
        "--concurrency", type=_positive, default=16, metavar="N", help="requests in flight at most (16)"
    )
    if limits:  # a router's are each route's own
        parser.add_argument(
            "--rpm",
            type=_per_minute,
            metavar="N",
            help="requests per minute at most, paced evenly (no limit)",
        )
        parser.add_argument(
            "--tpm",
            type=_per_minute,
            metavar="N",
            help="tokens per minute at most (prompt and response; estimated before sending, then corrected)",
        )
    parser.add_argument(
        "--limit-store",
        type=_limit_store,
        metavar="URL",
        help="keep the limits in the Redis server at URL (redis://host:6379/0), shared with every process "
        "naming it and the same limit key: batches side by side keep one deployment's limit together"
        + ("" if limits else " (each route's, and the rate each finds with no limit given)"),
    )
    if limits:
        parser.add_argument(
            "--limit-key",
            metavar="NAME",
            help="the limit's name in --limit-store (default: the API, base URL host and model), to share "
            "one limit between deployments",
        )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="send again the inputs whose result in the output is an error (rewritten without them first)",
    )
    parser.add_argument(
        "--allow-changed-settings",
        action="store_true",
        help="resume an output written with other settings (API, host, model, parameters): its results "
        "stand, and those whose request changed are sent again",
    )
    parser.add_argument(
        "--budget-requests",
        type=_natural,
        metavar="N",
        help="send at most N prompts in all, counting those already in the output (a fan-out: N prompt and "
        f"target pairs); then stop, exit {BUDGET_REACHED}: a higher N goes on",
    )
    parser.add_argument(
        "--budget-tokens",
        type=_natural,
        metavar="N",
        help="spend at most N tokens (prompt and response) in all, counting those of the output's results; "
        "a prompt whose estimate would go past it is not sent: the run stops, exit "
        f"{BUDGET_REACHED}, a higher N goes on",
    )
    parser.add_argument(
        "--summary",
        metavar="PATH",
        help="also write the summary as JSON to PATH: this run's figures, the output's totals per target or "
        "route, the budget",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def _client_args(parser: argparse.ArgumentParser, provider: str) -> None:
    group = parser.add_argument_group("connection")
    api = _api.get(provider)
    group.add_argument("--base-url", help=f"API base URL (${api.base_url_env})")
    for flag, keyword, env in credentials(provider):
        group.add_argument(flag, dest=keyword, metavar=keyword.upper(), help=f"(${env})")
    group.add_argument("--timeout", type=float, metavar="SECONDS", help="per request")
    group.add_argument("--max-retries", type=_natural, metavar="N", help="retries per prompt (2)")
    group.add_argument("--cache", metavar="PATH|URL", help=CACHE_HELP)


CACHE_HELP = (
    "a response cache: answers kept in this SQLite file (or the Redis at this redis:// URL) are not "
    "paid for again; what is sent is kept there"
)


def _param_args(parser: argparse.ArgumentParser, provider: str) -> None:
    group = parser.add_argument_group("generation parameters (batch: defaults for every line)")
    api = _api.get(provider)
    most = f"tokens to generate at most ({api.max_tokens})"
    group.add_argument("--max-tokens", type=_spec_number(provider, api.max_tokens), metavar="N", help=most)
    group.add_argument("--temperature", type=float, metavar="T")
    group.add_argument("--top-k", type=_spec_number(provider, "top_k"), metavar="K")
    group.add_argument("--top-p", type=float, metavar="P")
    if api.stop is not None:
        stop = "stop sequence (repeatable)"
        group.add_argument("--stop", action="append", dest=api.stop, metavar="TEXT", help=stop)
    if api.choices is not None:
        choice = "a choice the output must be (repeatable)"
        group.add_argument(
            f"--{api.choices}", action="append", dest=api.choices, metavar="CHOICE", help=choice
        )
    group.add_argument(
        "--param",
        action="append",
        type=_key_value,
        default=[],
        metavar="NAME=VALUE",
        help="any other parameter of complete(); VALUE is JSON, or else a string (repeatable)",
    )


def credentials(provider: str) -> list[tuple[str, str, str]]:
    """The API's credential flags: ``(flag, client keyword, environment variable)``."""
    return [
        (credential.flag, credential.keyword, credential.env) for credential in _api.get(provider).credentials
    ]


def flag_params(args: argparse.Namespace) -> dict[str, Any]:
    """The generation parameters given as flags, named as the provider's client names them (a router's:
    ``max_tokens``, which it sends under each route's API's name)."""
    api = None if args.provider == ROUTES else _api.get(args.provider)
    params: dict[str, Any] = {
        "max_tokens" if api is None else api.max_tokens: args.max_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
    }
    for keyword in () if api is None else (api.stop, api.choices):
        if keyword is not None:
            params[keyword] = getattr(args, keyword)
    params = {name: value for name, value in params.items() if value is not None}
    params.update(args.param)
    return params


def _spec_number(provider: str, keyword: str) -> Any:
    """``int`` or ``float``, as the provider's spec types the parameter. Its bounds are the client's to
    check, as for ``--param``: where the spec states none, the value is sent and the service judges it."""
    return _integer if _api.get(provider).schema(keyword).get("type") == "integer" else float


def _positive(text: str) -> int:
    value = _natural(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _per_minute(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def _limit_store(text: str) -> str:
    """A ``--limit-store`` URL, checked (and its store made) as ``limit_store=`` takes one."""
    from wrapper.pacing import limit_store

    try:
        limit_store(text)
    except (ImportError, ValueError) as exc:  # not a Redis URL, or redis-py missing
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _natural(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _key_value(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.replace("-", "_"), json.loads(value)
    except ValueError:
        return name.replace("-", "_"), value
