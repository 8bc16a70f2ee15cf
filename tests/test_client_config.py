"""A client's configuration is checked when it is built: a bad base_url or timeout never reaches a request."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import httpx
import pytest
from helpers import CLASSES, CREDENTIALS, LocalServer

from wrapper import DefaultAsyncHttpxClient, DefaultHttpxClient
from wrapper.errors import InsecureConnectionWarning

pytestmark = pytest.mark.usefixtures("library")  # every test on httpx and on httpx2

BAD_BASE_URLS = ["127.0.0.1:3026", "localhost", "ftp://example.com", "http://", "https:///path"]
BAD_TIMEOUTS: list[Any] = [
    0,
    -1,
    "5",
    True,
    float("nan"),
    httpx.Timeout(5.0, connect=0),
    httpx.Timeout(5.0, read=-1),
]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("provider", ["scale", "gradient"])
@pytest.mark.parametrize("base_url", BAD_BASE_URLS)
def test_a_base_url_without_scheme_or_host_is_refused(provider: str, mode: str, base_url: str) -> None:
    with pytest.raises(
        ValueError, match=r"^base_url must be an http:// or https:// URL with a host"
    ) as caught:
        CLASSES[provider][mode == "async"](**CREDENTIALS[provider], base_url=base_url)
    assert repr(base_url) in str(caught.value)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_a_timeout_that_is_not_none_a_positive_number_or_httpx_timeout_is_refused(
    mode: str, timeout: Any
) -> None:
    with pytest.raises(ValueError, match=r"^timeout"):
        CLASSES["scale"][mode == "async"](**CREDENTIALS["scale"], timeout=timeout)
    client = CLASSES["scale"][mode == "async"](**CREDENTIALS["scale"])
    with pytest.raises(ValueError, match=r"^timeout"):
        client.with_options(timeout=timeout)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    "timeout", [None, 5, 0.5, httpx.Timeout(None), httpx.Timeout(30.0, connect=2.0)], ids=repr
)
def test_good_timeouts_are_taken(mode: str, timeout: Any) -> None:
    client = CLASSES["scale"][mode == "async"](**CREDENTIALS["scale"], timeout=timeout)
    assert client.timeout == (timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout))


@pytest.mark.usefixtures("clean_env")
def test_a_base_url_from_the_environment_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGP_CLIENT_BASE_URL", "127.0.0.1:3026")
    with pytest.raises(ValueError, match="base_url must be"):
        CLASSES["scale"][0](api_key="k")


# --- what a base URL must not carry: credentials, a query, a fragment --------------------------------

EXTRAS = {
    "userinfo": ("//user:pw-SECRET@", r"must not hold credentials \(user:password@ before the host\)"),
    "query": ("/?key=q-SECRET", r"must not have a query \(\?\.\.\.\) or a fragment \(#\.\.\.\)"),
    "empty query": ("/?", r"must not have a query"),
    "fragment": ("/#frag-SECRET", r"must not have a query"),
}


def _with(url: str, extra: str) -> str:
    """``url`` (``http://host:port/prefix``) with user info before its host, or a query or fragment after."""
    return url.replace("//", extra, 1) if extra.startswith("//") else url + extra


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("provider", ["scale", "gradient"])
@pytest.mark.parametrize("extra", list(EXTRAS))
async def test_a_base_url_with_credentials_a_query_or_a_fragment_is_refused(
    server: LocalServer, lane: str, provider: str, extra: str
) -> None:
    """User info would go out as Basic auth (Gradient's token replaced by it on the sync client); a query or
    fragment would end the URL before the endpoint's path. Nothing is sent."""
    added, rule = EXTRAS[extra]
    base_url = _with(server.url + ("/api" if provider == "gradient" else ""), added)
    options = {"http_client": httpx.AsyncClient()} if lane == "httpx" else {}
    with pytest.raises(ValueError, match=rf"^base_url \(or {_ENV[provider]}\) {rule}") as caught:
        CLASSES[provider][lane != "sync"](**CREDENTIALS[provider], base_url=base_url, **options)
    assert "SECRET" not in str(caught.value)
    assert server.requests == []
    if "http_client" in options:
        await options["http_client"].aclose()


_ENV = {"scale": "SGP_CLIENT_BASE_URL", "gradient": "GRADIENT_API_URL"}


# --- credentials that would cross the network unprotected warn, once --------------------------------


POOLS = {
    "DefaultHttpxClient": (False, DefaultHttpxClient),
    "httpx.Client": (False, httpx.Client),
    "DefaultAsyncHttpxClient": (True, DefaultAsyncHttpxClient),
    "httpx.AsyncClient": (True, httpx.AsyncClient),
}


def _built(asynchronous: bool, base_url: str, pool: Any = None, **pool_options: Any) -> list[Any]:
    """The ``InsecureConnectionWarning``s of building a Scale client three times from one line, under
    Python's default filter (as a user's program has it), on ``pool(**pool_options)`` if given."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            http_client = None if pool is None else pool(**pool_options)
            CLASSES["scale"][asynchronous](**CREDENTIALS["scale"], base_url=base_url, http_client=http_client)
    return [w for w in caught if issubclass(w.category, InsecureConnectionWarning)]


@pytest.mark.usefixtures("clean_env")
def test_plain_http_to_another_host_warns_once(lane: str) -> None:
    pool = httpx.AsyncClient if lane == "httpx" else None
    (warned,) = _built(lane != "sync", "http://10.11.12.13:8080/v4", pool)
    assert issubclass(warned.category, UserWarning)
    assert str(warned.message).startswith(
        "base_url 'http://10.11.12.13:8080/v4' is plain http:// to another host"
    )
    assert warned.filename == __file__  # the line that built the client
    for local in ("http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9", "https://10.11.12.13"):
        assert _built(lane != "sync", local, pool) == []


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("pool", list(POOLS))
def test_a_pool_that_does_not_verify_tls_warns_once(pool: str) -> None:
    asynchronous, cls = POOLS[pool]
    (warned,) = _built(asynchronous, "https://api.example", cls, verify=False)
    assert str(warned.message).startswith("http_client does not verify TLS certificates (verify=False)")
    assert warned.filename == __file__
    assert _built(asynchronous, "https://127.0.0.1:8443", cls, verify=False) == []  # a local tunnel
    assert _built(asynchronous, "https://api.example", cls) == []


# --- every constructor argument of the wrong type is named, with the type it takes -------------------

CONSTRUCTOR_ARGUMENTS = [
    (cls, name) for pair in CLASSES.values() for cls in pair for name in inspect.signature(cls).parameters
]


def _takes_a_string(cls: type, name: str) -> bool:
    annotation = str(inspect.signature(cls).parameters[name].annotation)  # a string: postponed annotations
    return "str" in annotation.split(" | ")


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(
    ("cls", "name"), CONSTRUCTOR_ARGUMENTS, ids=lambda item: getattr(item, "__name__", item)
)
def test_an_argument_of_the_wrong_type_is_named_with_the_type_it_takes(cls: Any, name: str) -> None:
    wrong: Any = 12345678901 if _takes_a_string(cls, name) else object()
    with pytest.raises(ValueError, match=rf"^{name} must be ") as caught:
        cls(**{**CREDENTIALS[cls.API.name], name: wrong})
    message = str(caught.value)
    if _takes_a_string(cls, name):
        assert "must be a string" in message
        assert "got int" in message
        assert str(wrong) not in message  # a credential, even a mistyped one, is never shown


def test_the_string_arguments_are_told_apart_by_their_annotations() -> None:
    assert {name for cls, name in CONSTRUCTOR_ARGUMENTS if _takes_a_string(cls, name)} == {
        "api_key",
        "account_id",
        "access_token",
        "workspace_id",
        "base_url",
        "cache",  # a path or a redis:// URL (or a store)
    }
