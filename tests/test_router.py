"""The router on real sandboxes: routes and their checks, keyword mapping, failover, cooldowns, streams,
batches over routes of both APIs, options, raw responses, hooks and telemetry (sync and async)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar

import pytest
from helpers import GRADIENT_BODY, LocalServer, drain, json_reply, retry_waits
from test_telemetry import Telemetry
from test_telemetry import telemetry as telemetry

from wrapper import (
    AsyncRouter,
    BatchResult,
    BatchStats,
    CallHooks,
    CallInfo,
    Completion,
    RawResponse,
    RetryPolicy,
    Route,
    Router,
)
from wrapper.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    BadRequestError,
    ContentFlaggedError,
    InternalServerError,
)
from wrapper.gradient import AsyncGradient, Gradient
from wrapper.router import AllRoutesFailedError
from wrapper.sandbox import Sandbox
from wrapper.scale import AsyncScale, Scale

SCALE_MODEL = "llama-3-8b-instruct"
GRADIENT_MODEL = "nous-hermes2"
FAST = 60_000  # requests a minute: a limit no test reaches, so that no route opens slowly


@pytest.fixture(scope="module")
def sandboxes() -> Iterator[tuple[Sandbox, Sandbox]]:
    with Sandbox(seed=0) as east, Sandbox(seed=1) as west:
        yield east, west


@pytest.fixture
def east(sandboxes: tuple[Sandbox, Sandbox]) -> Iterator[Sandbox]:
    yield from _fresh(sandboxes[0])


@pytest.fixture
def west(sandboxes: tuple[Sandbox, Sandbox]) -> Iterator[Sandbox]:
    yield from _fresh(sandboxes[1])


def _fresh(sandbox: Sandbox) -> Iterator[Sandbox]:
    """The module's sandbox with no fault, stats or limit left from another test."""
    sandbox.reset()
    yield sandbox
    sandbox.clear_faults()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def scale(sandbox: Sandbox | str, mode: str, **options: Any) -> Any:
    url = sandbox if isinstance(sandbox, str) else sandbox.scale_base_url
    cls = AsyncScale if mode == "async" else Scale
    return cls(api_key="key-of-a-route", account_id="a", base_url=url, timeout=10, **options)


def gradient(sandbox: Sandbox | str, mode: str, **options: Any) -> Any:
    url = sandbox if isinstance(sandbox, str) else sandbox.gradient_base_url
    cls = AsyncGradient if mode == "async" else Gradient
    return cls(access_token="token-of-a-route", workspace_id="w", base_url=url, timeout=10, **options)


def router(mode: str, *routes: Route) -> Any:
    return AsyncRouter(routes) if mode == "async" else Router(routes)


def route(sandbox: Sandbox | str, mode: str, name: str, **options: Any) -> Route:
    options.setdefault("requests_per_minute", FAST)
    return Route(scale(sandbox, mode), SCALE_MODEL, name=name, **options)


async def run(call: Any) -> Any:
    """A sync call's result, or an async one's awaited."""
    return await call if asyncio.iscoroutine(call) else call


async def closed(routed: Any) -> None:
    await run(routed.close())


async def complete(routed: Any, prompt: str, **kwargs: Any) -> Any:
    return await run(routed.complete(prompt, **kwargs))


async def batch(routed: Any, prompts: list[str], **kwargs: Any) -> tuple[list[BatchResult], BatchStats]:
    results = routed.complete_many(prompts, **kwargs)
    got = [r async for r in results] if isinstance(routed, AsyncRouter) else list(results)
    return got, results.stats


async def chunks(stream: Any) -> list[Any]:
    return [c async for c in stream] if hasattr(stream, "__aiter__") else list(stream)


@pytest.fixture
async def testing() -> AsyncIterator[None]:
    """Testing mode: retries' backoffs are not waited."""
    with retry_waits():
        yield


# Routes and routers: what they accept, named as users name them


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"model": ""}, ValueError, "model must be a non-empty string"),
        ({"name": " "}, ValueError, "name must be a non-empty string"),
        ({"requests_per_minute": 0}, ValueError, "'r': requests_per_minute must be a number > 0"),
        ({"tokens_per_minute": "9"}, ValueError, "tokens_per_minute must be a number > 0"),
        ({"weight": 0}, ValueError, "'r': weight must be a number > 0"),
        ({"weight": True}, ValueError, "weight must be a number > 0"),
        ({"params": ["temperature"]}, ValueError, "params must be a mapping"),
        ({"params": {"temperature": 9}}, ValueError, "'r': params: .*temperature"),
        ({"params": {"guidance": ["a"]}}, TypeError, "'r': params: unexpected keyword argument 'guidance'"),
    ],
)
def test_a_route_names_the_field_and_the_rule_it_breaks(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    arguments: dict[str, Any] = {"model": SCALE_MODEL, "name": "r", **options}
    with scale("http://127.0.0.1:9", "sync") as client, pytest.raises(error, match=words):
        Route(client, **arguments)


async def test_a_router_takes_routes_of_its_own_kind_of_client(mode: str) -> None:
    with pytest.raises(TypeError, match=r"client must be a client of wrapper\.scale or wrapper\.gradient"):
        Route("not a client", SCALE_MODEL)  # type: ignore[arg-type]
    client = scale("http://127.0.0.1:9", mode)
    other = AsyncRouter if mode == "sync" else Router
    kind = "async" if mode == "sync" else "sync"
    try:
        with pytest.raises(
            TypeError, match=f"{other.__name__} takes {kind} clients; route 'r' has a {type(client).__name__}"
        ):
            other([Route(client, SCALE_MODEL, name="r")])
        with pytest.raises(ValueError, match="at least one Route"):
            router(mode)
        with pytest.raises(TypeError, match="must be Route"):
            router(mode, client)
        with pytest.raises(ValueError, match="'us' is given twice"):
            router(mode, Route(client, SCALE_MODEL, name="us"), Route(client, "m2", name="us"))
    finally:
        await run(client.close())


async def test_routes_are_named_after_their_model_unless_named(mode: str, east: Sandbox) -> None:
    client = scale(east, mode)
    routed = router(
        mode,
        Route(client, SCALE_MODEL),
        Route(client, SCALE_MODEL),
        Route(client, "mistral-7b-instruct", name=f"{SCALE_MODEL}#3"),
        Route(client, SCALE_MODEL),
    )
    names = [r.name for r in routed.routes]
    assert names == [SCALE_MODEL, f"{SCALE_MODEL}#2", f"{SCALE_MODEL}#3", f"{SCALE_MODEL}#4"]
    assert repr(routed).startswith(f"{type(routed).__name__}([{SCALE_MODEL}: scale {SCALE_MODEL}, ")
    await closed(routed)


# Keywords: shared ones mapped per API, a route's own added, one a route's API lacks refused


async def test_max_tokens_and_a_routes_params_are_sent_as_its_api_names_them(
    mode: str, server: LocalServer
) -> None:
    server.script(json_reply(200, GRADIENT_BODY))
    client = gradient(server.url, mode)
    routed = router(mode, Route(client, GRADIENT_MODEL, params={"temperature": 0.5, "top_k": 3}))
    result = await complete(routed, "Is it?", max_tokens=7, top_k=5)
    await closed(routed)
    body = server.requests[-1][3]
    assert body["maxGeneratedTokenCount"] == 7
    assert body["temperature"] == 0.5
    assert body["topK"] == 5  # the call's keyword wins over the route's
    assert result.route == GRADIENT_MODEL


async def test_a_keyword_a_routes_api_lacks_is_refused_before_anything_is_sent(
    mode: str, east: Sandbox
) -> None:
    routed = router(
        mode,
        route(east, mode, "us"),
        Route(gradient(east, mode), GRADIENT_MODEL, name="g", requests_per_minute=FAST),
    )
    with pytest.raises(TypeError, match=r"route 'us' \(scale\) has no keyword argument 'guidance'"):
        await complete(routed, "Is it?", guidance=["yes", "no"])
    with pytest.raises(TypeError, match=r"route 'g' \(gradient\) has no keyword argument 'stop_sequences'"):
        routed.stream("Is it?", stop_sequences=["."])
    with pytest.raises(TypeError, match="route 'g'"):
        routed.complete_many(["a"], logprobs=True)
    await closed(routed)
    assert east.stats().requests == 0


# Results


async def test_results_name_their_route_and_keep_it_through_to_dict(mode: str, east: Sandbox) -> None:
    client = scale(east, mode)
    try:
        plain = await run(client.complete(SCALE_MODEL, "Alice", max_tokens=3))
        routed = router(mode, Route(client, SCALE_MODEL, name="us"))
        result = await complete(routed, "Alice", max_tokens=3)
        assert plain.route is None
        assert result.route == "us"
        assert result == plain  # the route, as the headers, is not part of what a completion is
        assert Completion.from_dict(result.to_dict()).route == "us"
        assert result.to_dict()["route"] == "us"
        streamed = routed.stream("Alice", max_tokens=3)
        got = await chunks(streamed)
        assert {chunk.route for chunk in got} == {"us"}
        assert (await run(streamed.get_final_completion())).route == "us"
    finally:
        await run(client.close())


# Choosing: load shared by weight among routes with budget left


async def test_requests_one_after_another_are_shared_by_weight(mode: str, east: Sandbox) -> None:
    routed = router(mode, route(east, mode, "heavy", weight=2), route(east, mode, "light"))
    served = [(await complete(routed, "Alice", max_tokens=1)).route for _ in range(30)]
    await closed(routed)
    assert served.count("heavy") == 20
    assert served.count("light") == 10


# Failover


async def test_a_route_answering_503_is_cooled_down_and_the_other_serves_every_prompt(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    east.inject(status=503, rate=1.0)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    results, stats = await batch(routed, ["Alice"] * 100, concurrency=8, max_tokens=2)
    await closed(routed)
    assert sorted(r.index for r in results) == list(range(100))
    assert all(r.ok and r.completion is not None and r.completion.route == "west" for r in results)
    # Cooled down after its first failures: without the cooldown, east would take half the requests.
    assert 3 <= east.stats().requests <= 24
    assert stats.routes["east"].failed == stats.routes["east"].requests == east.stats().requests
    assert stats.routes["west"].completed == stats.completed == 100
    assert stats.failed == 0
    assert stats.requests == east.stats().requests + west.stats().requests


async def test_a_route_that_served_well_then_fails_every_request_is_cooled_down_at_once(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    """Its successes a moment ago do not hide that it is down now: once its last answers all failed it
    gets no more requests (it took 52 of the next 60 when a share of the last seconds' answers decided)."""
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    healthy, _ = await batch(routed, ["Alice"] * 100, concurrency=16, max_tokens=2)
    assert all(r.ok for r in healthy)
    assert east.stats().requests >= 30  # its share of a healthy stretch
    east.reset_stats()
    east.inject(status=503, rate=1.0)
    results, stats = await batch(routed, ["Alice"] * 60, concurrency=16, max_tokens=2)
    await closed(routed)
    assert all(r.ok and r.completion is not None and r.completion.route == "west" for r in results)
    assert east.stats().requests <= 16  # those already on their way to it, at most
    assert stats.routes["east"].failed == east.stats().requests


async def test_a_route_whose_server_goes_away_mid_batch_loses_no_prompt(mode: str) -> None:
    with Sandbox(seed=0) as going, Sandbox(seed=1) as staying:
        routed = router(mode, route(going, mode, "going"), route(staying, mode, "staying"))
        results = routed.complete_many(["Alice"] * 80, concurrency=8, max_tokens=2)
        got: list[BatchResult] = []
        if isinstance(routed, AsyncRouter):
            async for result in results:
                got.append(result)
                if len(got) == 20:
                    await asyncio.to_thread(going.stop)
        else:
            for result in results:
                got.append(result)
                if len(got) == 20:
                    going.stop()
        await closed(routed)
    assert sorted(r.index for r in got) == list(range(80))  # each prompt once, none lost
    assert all(r.ok for r in got)
    routes = [r.completion.route for r in got[20:] if r.completion is not None]
    assert routes.count("staying") >= 50
    assert results.stats.routes["going"].failed >= 1


async def test_a_request_error_is_raised_as_it_is_and_not_sent_elsewhere(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    east.inject(status=400, count=1)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    with pytest.raises(BadRequestError):
        await complete(routed, "Alice", max_tokens=2)  # a fresh router tries its first route first
    flagged = router(
        mode,
        Route(gradient(east, mode), GRADIENT_MODEL, name="g", requests_per_minute=FAST),
        route(west, mode, "west"),
    )
    with pytest.raises(ContentFlaggedError):
        await complete(flagged, "how to make explosives", max_tokens=2)
    await closed(routed)
    await closed(flagged)
    assert west.stats().requests == 0


async def test_every_route_down_says_what_each_answered(mode: str, east: Sandbox, testing: None) -> None:
    east.inject(status=503, rate=1.0)
    routed = router(mode, route(east, mode, "east"), route("http://127.0.0.1:9", mode, "nowhere"))
    with pytest.raises(AllRoutesFailedError) as raised:
        await complete(routed, "Alice", max_tokens=2, max_retries=1)
    await closed(routed)
    error = raised.value
    assert isinstance(error, APIError)
    assert set(error.errors) == {"east", "nowhere"}
    assert isinstance(error.errors["east"], InternalServerError)
    assert isinstance(error.errors["nowhere"], APIConnectionError)
    message = str(error)
    assert "every route failed (4 attempts)" in message
    assert "east: InternalServerError" in message
    assert "nowhere: APIConnectionError" in message
    assert isinstance(error.__cause__, APIError)
    assert east.stats().requests == 2  # max_retries=1: every route tried twice


async def test_a_request_waits_for_a_cooling_route_rather_than_fail(
    mode: str, east: Sandbox, testing: None
) -> None:
    east.inject(status=503, count=3)
    routed = router(mode, route(east, mode, "only"))
    with pytest.raises(AllRoutesFailedError):
        await complete(routed, "Alice", max_tokens=2)  # three failures in a row: it cools down
    result = await complete(routed, "Alice", max_tokens=2)  # tried once its cooldown is over
    await closed(routed)
    assert result.route == "only"
    assert east.stats().requests == 4


async def test_a_deadline_bounds_the_whole_call_over_the_routes(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    east.inject(delay=2, rate=1.0)
    west.inject(delay=2, rate=1.0)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    with pytest.raises(APITimeoutError, match=r"deadline of 0\.5 s ran out"):
        await complete(routed, "Alice", max_tokens=2, deadline=0.5)
    await closed(routed)


async def test_a_pause_of_the_only_route_is_cut_as_the_retry_policy_cuts_retry_after(
    mode: str, east: Sandbox
) -> None:
    """A 429 asking for 30 s pauses the route's pacer no longer than a retry would wait: the policy's
    ``max_retry_after``, well within the call's deadline (it paused 30 s and the call timed out)."""
    east.inject(status=429, retry_after=30, count=1)
    routed = router(mode, route(east, mode, "only"))
    policy = RetryPolicy(max_retry_after=0.05)
    result = await complete(routed, "Alice", max_tokens=2, retry=policy, deadline=5)
    await closed(routed)
    assert result.route == "only"
    assert east.stats().requests == 2


# Streams fail over before their first chunk only


async def test_a_stream_fails_over_before_its_first_chunk(mode: str, east: Sandbox, west: Sandbox) -> None:
    east.inject(status=503, count=1)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    got = await chunks(routed.stream("Alice", max_tokens=4))
    assert got
    assert {chunk.route for chunk in got} == {"west"}
    await closed(routed)


async def test_a_stream_that_broke_after_its_first_chunk_is_not_sent_elsewhere(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    east.inject(cut=2, count=1)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    received: list[str] = []
    with pytest.raises(APIConnectionError):
        await drain(routed.stream("Alice was beginning", max_tokens=16), received)
    await closed(routed)
    assert len(received) == 2
    assert west.stats().requests == 0


# Batches: both APIs in one, stats per route


async def test_routes_of_both_apis_mix_in_one_batch(mode: str, east: Sandbox) -> None:
    routed = router(
        mode,
        route(east, mode, "scale"),
        Route(gradient(east, mode), GRADIENT_MODEL, name="gradient", requests_per_minute=FAST),
    )
    results, stats = await batch(routed, ["Alice was"] * 40, concurrency=4, ordered=True, max_tokens=3)
    await closed(routed)
    assert [r.index for r in results] == list(range(40))
    by_route = {
        name: [r for r in results if r.completion and r.completion.route == name] for name in stats.routes
    }
    assert set(by_route) == {"scale", "gradient"}
    assert len(by_route["scale"]) >= 10
    assert len(by_route["gradient"]) >= 10
    assert all(r.completion and r.completion.response_tokens == 3 for r in by_route["scale"])
    assert all(r.completion and len(r.completion.text.split()) <= 3 for r in by_route["gradient"])
    assert stats.routes["scale"].completed + stats.routes["gradient"].completed == stats.completed == 40
    assert stats.routes["scale"].requests == len(by_route["scale"])


# Options, raw responses, hooks, telemetry, lifecycle


async def test_with_options_reaches_every_route_and_shares_their_state(
    mode: str, server: LocalServer
) -> None:
    server.script(json_reply(200, {"completions": [["p", ["Paris"]]], "finish_reason": "stop"}))
    first, second = scale(server.url, mode), scale(server.url, mode)
    routed = router(mode, Route(first, SCALE_MODEL, name="a"), Route(second, SCALE_MODEL, name="b"))
    tagged = routed.with_options(extra_headers={"X-Team": "search"}, timeout=3)
    assert [r.name for r in tagged.routes] == ["a", "b"]
    served = {(await complete(tagged, "Alice")).route for _ in range(2)}
    assert served == {"a", "b"}
    assert all(headers.get("x-team") == "search" for _, _, headers, _ in server.requests)
    await closed(tagged)  # its copies of the clients alone
    assert (await complete(routed, "Alice")).route in {"a", "b"}
    await closed(routed)
    with pytest.raises(Exception, match="closed"):
        await run(first.complete(SCALE_MODEL, "Alice"))
    with pytest.raises(ValueError, match="max_retries"):
        routed.with_options(max_retries=-1)


async def test_raw_and_streaming_responses_work_through_a_router(mode: str, east: Sandbox) -> None:
    routed = router(mode, route(east, mode, "us"))
    raw = await run(routed.with_raw_response.complete("Alice", max_tokens=2))
    assert isinstance(raw, RawResponse)
    assert raw.status_code == 200
    assert raw.parse().route == "us"
    if mode == "async":
        async with routed.with_streaming_response.stream("Alice", max_tokens=2) as response:
            assert response.status_code == 200
            got = await chunks(response.parse())
    else:
        with routed.with_streaming_response.stream("Alice", max_tokens=2) as response:
            assert response.status_code == 200
            got = await chunks(response.parse())
    assert {chunk.route for chunk in got} == {"us"}
    await closed(routed)


class _Seen(CallHooks):
    calls: ClassVar[list[tuple[str | None, str]]] = []

    def before(self) -> None:
        self.calls.append((self.call.route, self.call.model))


async def test_a_callers_hooks_see_each_route_call_and_its_route(
    mode: str, east: Sandbox, west: Sandbox
) -> None:
    _Seen.calls = []
    east.inject(status=503, count=1)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    result = await complete(routed.with_options(hooks=[_Seen]), "Alice", max_tokens=2, hooks=[_Seen])
    await closed(routed)
    assert result.route == "west"
    assert _Seen.calls == [("east", SCALE_MODEL)] * 2 + [("west", SCALE_MODEL)] * 2


async def test_telemetry_traces_each_route_call(
    mode: str, east: Sandbox, west: Sandbox, telemetry: Telemetry
) -> None:
    east.inject(status=503, count=1)
    routed = router(mode, route(east, mode, "east"), route(west, mode, "west"))
    await complete(routed, "Alice", max_tokens=2)
    await closed(routed)
    spans = telemetry.finished()
    assert len(spans) == 2  # the failed call on east, the one west served
    assert [span.status.is_ok for span in spans] == [False, True]


def test_a_callinfo_without_a_router_has_no_route() -> None:
    with scale("http://127.0.0.1:9", "sync") as client:
        assert CallInfo(client, SCALE_MODEL, "p", {}, False).route is None
