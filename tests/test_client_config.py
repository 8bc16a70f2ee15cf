"""A client's configuration is checked when it is built: a bad base_url or timeout never reaches a request."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import pytest
from helpers import CLASSES, CREDENTIALS

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
    }
