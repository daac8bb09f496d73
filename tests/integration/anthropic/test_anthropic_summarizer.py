"""AnthropicSummarizer over real HTTP against a loopback Messages API stub.

Waits (rate limit, backoff) go through an injected clock and sleep, so the tests
assert the exact delays the policy computed without sleeping through them; one test
checks the limiter against the wall clock as well.
"""

from __future__ import annotations

import asyncio
import random
import socket
import subprocess
import sys
import time
from typing import Any

import anthropic
import pytest

from tiered_memory.errors import (
    BackendUnavailableError,
    ConfigurationError,
    MissingDependencyError,
)
from tiered_memory.models import MemoryType
from tiered_memory.policy import ArchivalPolicy
from tiered_memory.ports import Summarizer, SummaryRequest
from tiered_memory.summarizers import ExtractiveSummarizer
from tiered_memory.summarizers.anthropic import (
    SYSTEM_PROMPT,
    AnthropicSummarizer,
    Backoff,
    RateLimiter,
    SummarizerRequestError,
    SummarizerResponseError,
    pricing_for,
)

from .conftest import MessagesStub, Received, error, message, raw

pytestmark = pytest.mark.http

MEMORY = (
    "We caught up over lunch. Dr. Ava Chen will present the Q3 budget of $45,000 on "
    "March 14th at 3pm. The coffee was bad. Send the slides to Marco before Friday."
)
REQUEST = SummaryRequest(
    content=MEMORY, memory_type=MemoryType.EPISODIC, domain="work", entities=("Ava Chen", "Marco")
)
SEED_SENTENCE = (
    "Summarize the following memory into 2-3 sentences that preserve the core semantic "
    "meaning, key facts, names, dates, and actionable details."
)


class FakeTime:
    """A monotonic clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


def make(stub: MessagesStub, fake_time: FakeTime, **kwargs: Any) -> AnthropicSummarizer:
    kwargs.setdefault("api_key", "test-key")
    kwargs.setdefault("base_url", stub.url)
    return AnthropicSummarizer(
        clock=fake_time.clock, sleep=fake_time.sleep, rng=random.Random(7), **kwargs
    )


def api_key_of(request: Received) -> str:
    """The key as sent: SDK versions differ between x-api-key and a bearer header."""
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    return request.headers["authorization"].removeprefix("Bearer ")


# -- the prompt -----------------------------------------------------------------------


async def test_sends_the_seed_prompt_with_content_and_context(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    summarizer = make(stub, fake_time)
    assert isinstance(summarizer, Summarizer)
    summary = await summarizer.summarize(REQUEST)
    await summarizer.close()

    assert summary.text == "Ava Chen presents the budget on March 14th."
    assert (summary.input_tokens, summary.output_tokens) == (120, 30)
    assert summary.model == "claude-haiku-4-5-20251001"
    [sent] = stub.received
    assert sent.path == "/v1/messages"
    assert api_key_of(sent) == "test-key"
    assert sent.body["model"] == "claude-haiku-4-5"
    assert sent.body["system"] == SYSTEM_PROMPT
    assert SEED_SENTENCE in " ".join(sent.body["system"].split())
    assert sent.body["max_tokens"] == 200
    [user] = sent.body["messages"]
    assert user["role"] == "user"
    assert user["content"].startswith(MEMORY)
    assert user["content"].endswith("Additional context - Domain: work, Entities: Ava Chen, Marco")


async def test_memory_type_stands_in_for_a_missing_domain(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    summarizer = make(stub, fake_time, max_tokens=120, model="claude-haiku-4-5-20251001")
    await summarizer.summarize(
        SummaryRequest(content="Ava likes tea.", memory_type=MemoryType.FACTUAL)
    )
    [sent] = stub.received
    assert sent.body["messages"][0]["content"].endswith("Domain: factual, Entities: none")
    assert sent.body["max_tokens"] == 120
    assert sent.body["model"] == "claude-haiku-4-5-20251001"


@pytest.mark.parametrize("max_tokens", [0, 4097])
def test_max_tokens_is_bounded(max_tokens: int) -> None:
    with pytest.raises(ConfigurationError):
        AnthropicSummarizer(api_key="k", max_tokens=max_tokens)


async def test_a_reply_cut_by_max_tokens_keeps_complete_sentences(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.then(message("Ava presents on March 14th. Marco gets the sli", stop_reason="max_tokens"))
    summary = await make(stub, fake_time).summarize(REQUEST)
    assert summary.text == "Ava presents on March 14th."


# -- backoff --------------------------------------------------------------------------


async def test_429_529_and_500_are_retried_with_backoff(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.then(
        error(429, "rate_limit_error", retry_after="2"),
        error(529, "overloaded_error"),
        error(500, "api_error"),
        message(),
    )
    summarizer = make(stub, fake_time)
    summary = await summarizer.summarize(REQUEST)

    assert summary.text.startswith("Ava Chen")
    assert len(stub.received) == 4
    # The limiter never had to wait (every backoff exceeds its 0.1 s spacing), so the
    # sleeps are exactly the three backoff delays.
    first, second, third = fake_time.sleeps
    assert first >= 2.0  # Retry-After: 2 is honoured as a lower bound
    assert 0.5 <= second <= 1.0  # equal jitter: between half and all of 0.5 * 2**1
    assert 1.0 <= third <= 2.0  # ... and of 0.5 * 2**2
    usage = summarizer.usage
    assert (usage.calls, usage.requests, usage.retries, usage.failures) == (1, 4, 3, 0)


async def test_backoff_delays_double_and_are_capped() -> None:
    backoff = Backoff(base_seconds=0.5, max_seconds=3.0, max_retry_after=10.0)
    rng = random.Random(1)
    for retry, ceiling in enumerate([0.5, 1.0, 2.0, 3.0, 3.0]):
        delay = backoff.delay(retry, rng)
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.delay(0, rng, retry_after=30.0) == 10.0


async def test_gives_up_after_max_retries_with_a_typed_chained_error(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.default = error(529, "overloaded_error")
    summarizer = make(stub, fake_time, max_retries=2)
    with pytest.raises(BackendUnavailableError, match="after 3 attempts") as caught:
        await summarizer.summarize(REQUEST)
    assert not isinstance(caught.value, SummarizerResponseError)
    assert isinstance(caught.value.__cause__, anthropic.OverloadedError)
    assert len(stub.received) == 3
    assert len(fake_time.sleeps) == 2
    usage = summarizer.usage
    assert (usage.calls, usage.requests, usage.failures, usage.fallbacks) == (0, 3, 1, 0)


async def test_timeouts_are_retried_then_reported_unavailable(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.default = error(200, "slow", delay=1.0)  # never answered in time
    summarizer = make(stub, fake_time, timeout=0.2, max_retries=1)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        await summarizer.summarize(REQUEST)
    assert time.monotonic() - started < 1.5
    assert isinstance(caught.value.__cause__, anthropic.APITimeoutError)
    assert len(stub.received) == 2


async def test_connection_refused_is_backend_unavailable(fake_time: FakeTime) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = AnthropicSummarizer(
        api_key="k",
        base_url=f"http://127.0.0.1:{port}",
        max_retries=1,
        clock=fake_time.clock,
        sleep=fake_time.sleep,
    )
    with pytest.raises(BackendUnavailableError) as caught:
        await summarizer.summarize(REQUEST)
    assert isinstance(caught.value.__cause__, anthropic.APIConnectionError)
    assert summarizer.usage.requests == 2


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_the_sdk_never_retries_behind_our_back(
    stub: MessagesStub, fake_time: FakeTime, kind: str
) -> None:
    """Clients passed in keep their own settings, except retries: those are ours."""
    stub.then(error(529, "overloaded_error"), message())
    options: dict[str, Any] = {"api_key": "test-key", "base_url": stub.url, "max_retries": 5}
    if kind == "async":
        summarizer = make(
            stub,
            fake_time,
            api_key=None,
            base_url=None,
            async_client=anthropic.AsyncAnthropic(**options),
            max_retries=0,
        )
    else:
        summarizer = make(
            stub,
            fake_time,
            api_key=None,
            base_url=None,
            client=anthropic.Anthropic(**options),
            max_retries=0,
        )
    with pytest.raises(BackendUnavailableError):
        await summarizer.summarize(REQUEST)
    assert len(stub.received) == 1
    summary = await summarizer.summarize(REQUEST)  # the same client works on
    assert summary.text.startswith("Ava Chen")
    assert len(stub.received) == 2


# -- malformed answers and fallback ------------------------------------------------------

MALFORMED = {
    "plain text": raw(b"definitely not json", "text/plain"),
    "truncated json": raw(b'{"id": "msg_1", "content": [{"type": "te'),
    "json list": raw(b"[1, 2, 3]"),
    "no content": raw(b'{"id": "msg_1", "type": "message", "usage": {"input_tokens": 1}}'),
    "content not a list": raw(b'{"content": "hello"}'),
    "no text block": raw(
        b'{"content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}]}'
    ),
    "text not a string": raw(b'{"content": [{"type": "text", "text": 42}]}'),
    "empty text": raw(b'{"content": [{"type": "text", "text": "   "}]}'),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_malformed_bodies_are_typed_errors_not_crashes(
    stub: MessagesStub, fake_time: FakeTime, case: str
) -> None:
    stub.then(MALFORMED[case])
    summarizer = make(stub, fake_time)
    with pytest.raises(SummarizerResponseError):
        await summarizer.summarize(REQUEST)
    assert len(stub.received) == 1  # a broken body is not retried
    assert summarizer.usage.failures == 1


async def test_fallback_serves_a_failed_memory_only_when_configured(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    extractive = ExtractiveSummarizer()
    summarizer = make(stub, fake_time, fallback=extractive)

    ok = await summarizer.summarize(REQUEST)
    assert ok.model == "claude-haiku-4-5-20251001"

    stub.then(MALFORMED["plain text"])
    fell_back = await summarizer.summarize(REQUEST)
    assert fell_back == await extractive.summarize(REQUEST)
    assert fell_back.model == "extractive"

    stub.then(*[error(429, "rate_limit_error")] * 5)
    exhausted = await summarizer.summarize(REQUEST)
    assert exhausted.model == "extractive"

    usage = summarizer.usage
    assert (usage.calls, usage.failures, usage.fallbacks) == (1, 2, 2)
    assert usage.requests == 1 + 1 + 5

    without = make(stub, fake_time)
    stub.then(MALFORMED["plain text"])
    with pytest.raises(SummarizerResponseError):
        await without.summarize(REQUEST)


async def test_rejected_request_is_its_own_error_and_may_fall_back(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.then(error(400, "invalid_request_error"))
    with pytest.raises(SummarizerRequestError, match="400"):
        await make(stub, fake_time).summarize(REQUEST)
    stub.then(error(413, "request_too_large"))
    summary = await make(stub, fake_time, fallback=ExtractiveSummarizer()).summarize(REQUEST)
    assert summary.model == "extractive"
    assert len(stub.received) == 2  # neither was retried


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "authentication_error"), (404, "not_found_error")]
)
async def test_configuration_errors_never_fall_back(
    stub: MessagesStub, fake_time: FakeTime, status: int, kind: str
) -> None:
    stub.then(error(status, kind))
    summarizer = make(stub, fake_time, fallback=ExtractiveSummarizer())
    with pytest.raises(ConfigurationError):
        await summarizer.summarize(REQUEST)
    assert summarizer.usage.fallbacks == 0
    assert len(stub.received) == 1


# -- rate limit -------------------------------------------------------------------------


async def test_limiter_spaces_sequential_calls(fake_time: FakeTime) -> None:
    limiter = RateLimiter(10.0, clock=fake_time.clock, sleep=fake_time.sleep)
    waits = [await limiter.acquire() for _ in range(20)]
    assert waits[0] == 0.0
    assert waits[1:] == pytest.approx([0.1] * 19)
    assert fake_time.now == pytest.approx(1.9)


async def test_limiter_gives_concurrent_callers_distinct_slots(fake_time: FakeTime) -> None:
    limiter = RateLimiter(10.0, clock=fake_time.clock, sleep=fake_time.sleep)
    waits = [limiter.reserve() for _ in range(20)]  # all at t=0, as gather() would
    assert waits == pytest.approx([i / 10 for i in range(20)])


async def test_limiter_burst_and_idle_time(fake_time: FakeTime) -> None:
    limiter = RateLimiter(10.0, burst=3, clock=fake_time.clock, sleep=fake_time.sleep)
    assert [limiter.reserve() for _ in range(5)] == pytest.approx([0, 0, 0, 0.1, 0.2])
    fake_time.now = 10.0  # a long idle spell does not bank more than the burst
    assert [limiter.reserve() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


async def test_twenty_summaries_at_ten_per_second_take_1_9_seconds(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    summarizer = make(stub, fake_time)
    for _ in range(20):
        await summarizer.summarize(REQUEST)
    assert len(stub.received) == 20
    assert fake_time.now == pytest.approx(1.9)
    assert fake_time.sleeps == pytest.approx([0.1] * 19)


async def test_rate_limit_holds_on_the_wall_clock(stub: MessagesStub) -> None:
    summarizer = AnthropicSummarizer(api_key="k", base_url=stub.url, rate_per_second=20.0)
    started = time.monotonic()
    await asyncio.gather(*(summarizer.summarize(REQUEST) for _ in range(11)))
    elapsed = time.monotonic() - started
    await summarizer.close()
    assert elapsed >= 0.5 - 0.01
    arrivals = sorted(r.at for r in stub.received)
    assert arrivals[-1] - arrivals[0] >= 0.5 - 0.02


def test_policy_supplies_rate_retries_and_backoff() -> None:
    policy = ArchivalPolicy(
        summarizer_rate_per_second=4.0, max_retries=7, backoff_base_seconds=0.25
    )
    summarizer = AnthropicSummarizer.from_policy(policy, api_key="k")
    assert summarizer.max_retries == 7
    assert summarizer.backoff.base_seconds == 0.25
    assert summarizer.rate_per_second == 4.0


# -- usage and cost -----------------------------------------------------------------------


async def test_usage_accumulates_and_prices_real_token_counts(
    stub: MessagesStub, fake_time: FakeTime
) -> None:
    stub.then(
        message(input_tokens=100, output_tokens=20),
        message(input_tokens=200, output_tokens=40),
        message(input_tokens=300, output_tokens=60),
    )
    summarizer = make(stub, fake_time)
    before = summarizer.estimate_cost(10)
    assert (before.input_tokens, before.output_tokens) == (4300, 800)  # seed 001 averages

    for _ in range(3):
        await summarizer.summarize(REQUEST)
    usage = summarizer.usage
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (3, 600, 120)
    haiku = pricing_for("claude-haiku-4-5")
    assert usage.cost_usd == pytest.approx(haiku.cost(600, 120))
    assert usage.cost_usd == pytest.approx((600 * 1.0 + 120 * 5.0) / 1e6)

    after = summarizer.estimate_cost(10)  # observed averages: 200 in, 40 out
    assert (after.requests, after.input_tokens, after.output_tokens) == (10, 2000, 400)
    assert after.usd == pytest.approx(haiku.cost(2000, 400))

    assert summarizer.reset_usage() == usage
    assert summarizer.usage.calls == 0


def test_cost_of_given_requests_counts_their_prompts() -> None:
    summarizer = AnthropicSummarizer(api_key="k", max_tokens=50)
    short = SummaryRequest(content="Ava likes tea.")
    long = SummaryRequest(content="Ava likes tea. " * 200)
    one_short = summarizer.estimate_cost([short])
    one_long = summarizer.estimate_cost([long])
    both = summarizer.estimate_cost([short, long])
    assert one_short.input_tokens > 50  # the system prompt alone is ~45 tokens
    assert one_long.input_tokens > one_short.input_tokens + 600
    assert both.input_tokens == one_short.input_tokens + one_long.input_tokens
    assert both.output_tokens == 2 * 50  # bounded by max_tokens
    assert both.requests == 2


# -- start-up ---------------------------------------------------------------------------------


async def test_api_key_is_read_from_the_environment_at_first_use(
    stub: MessagesStub, fake_time: FakeTime, monkeypatch: pytest.MonkeyPatch
) -> None:
    summarizer = make(stub, fake_time, api_key=None)  # no key anywhere: still constructs
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        await summarizer.summarize(REQUEST)
    assert stub.received == []

    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    later = make(stub, fake_time, api_key=None)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "changed-before-first-use")
    await later.summarize(REQUEST)
    assert api_key_of(stub.received[-1]) == "changed-before-first-use"
    await later.close()


def test_importing_the_module_does_not_import_the_sdk() -> None:
    code = (
        "import sys, tiered_memory.summarizers.anthropic as m; "
        "m.AnthropicSummarizer(api_key='k'); print('anthropic' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


async def test_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, fake_time: FakeTime
) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    summarizer = AnthropicSummarizer(api_key="k", clock=fake_time.clock, sleep=fake_time.sleep)
    with pytest.raises(MissingDependencyError, match=r"tiered-memory\[anthropic\]"):
        await summarizer.summarize(REQUEST)


def test_client_and_key_are_exclusive() -> None:
    with pytest.raises(ConfigurationError):
        AnthropicSummarizer(async_client=anthropic.AsyncAnthropic(api_key="k"), api_key="k")
