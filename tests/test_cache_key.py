"""The response cache's key: everything a request sends, and a sample index when it samples.

The parameters are read from each API's spec (``generated/<api>/params.py``), never listed here.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from helpers import some_value

from wrapper import apis
from wrapper.cache import request_key

BASE = {"scale": "https://api.egp.scale.com", "gradient": "https://api.gradient.ai/api"}


def keywords(name: str) -> dict[str, dict[str, Any]]:
    keywords: dict[str, dict[str, Any]] = importlib.import_module(
        f"wrapper._generated.{name}.params"
    ).KEYWORDS
    return keywords


def key(name: str, body: dict[str, Any], sample: int = 0, **changes: str) -> str:
    where = {"base_url": BASE[name], "model": "m", "url": BASE[name] + "/models/m/complete", **changes}
    return request_key(apis.get(name), where["base_url"], where["model"], where["url"], body, sample)


@pytest.mark.parametrize("name", apis.NAMES)
def test_every_body_field_of_the_spec_is_in_the_key(name: str) -> None:
    base = {"prompt": "Alice was", "temperature": 0}
    keys = {key(name, base)}
    for keyword, data in keywords(name).items():
        value = some_value(data["schema"])
        changed = key(name, {**base, data["wire"]: value})
        assert changed not in keys, keyword
        keys.add(changed)
    assert key(name, {**base, "field_of_a_later_release": 1}) not in keys  # extra_body, a newer spec


@pytest.mark.parametrize("name", apis.NAMES)
def test_the_api_deployment_model_and_url_are_in_the_key_and_field_order_is_not(name: str) -> None:
    body = {"prompt": "Alice was", "temperature": 0, "stop": ["."]}
    same = key(name, dict(reversed(body.items())))
    assert key(name, body) == same
    assert key(name, body, model="m2") != same
    assert key(name, body, base_url="https://other.example/api") != same
    assert key(name, body, url=BASE[name] + "/models/m/complete?version=2") != same
    other = next(n for n in apis.NAMES if n != name)
    assert request_key(apis.get(other), BASE[name], "m", BASE[name] + "/models/m/complete", body) != same


@pytest.mark.parametrize("name", apis.NAMES)
def test_a_sample_index_counts_only_when_the_request_samples(name: str) -> None:
    wire = keywords(name)[apis.get(name).temperature]["wire"]  # type: ignore[index]
    greedy = {"prompt": "Alice was", wire: 0}
    assert key(name, greedy, sample=0) == key(name, greedy, sample=3)
    hot = {"prompt": "Alice was", wire: 0.7}
    assert len({key(name, hot, sample=i) for i in range(5)}) == 5


def test_an_unset_temperature_samples_as_the_spec_says() -> None:
    scale, gradient = apis.get("scale"), apis.get("gradient")
    assert keywords("scale")["temperature"]["schema"]["default"] > 0  # the spec's server default
    assert scale.samples({"prompt": "x"})
    assert not scale.samples({"prompt": "x", "temperature": 0})
    assert "default" not in keywords("gradient")["temperature"]["schema"]  # the spec leaves it open
    assert gradient.samples({"query": "x"})  # so it is taken to sample
    assert gradient.samples({"query": "x", "temperature": None})
    assert not gradient.samples({"query": "x", "temperature": 0.0})
