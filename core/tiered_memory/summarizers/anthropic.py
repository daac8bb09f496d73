"""Archive summaries from Claude Haiku, with our own rate limit, backoff and accounting.

The SDK's built-in retries are switched off (`max_retries=0`) so the retry policy is
this module's: it is the one the archival pipeline was designed around (seed 001:
10 requests/s, exponential backoff), it is testable with an injected clock, and every
attempt is counted in `usage`, which the maintenance report and `dry_run` cost
estimates read. The SDK is imported on first use, never at import time, and the API
key is looked up then too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from tiered_memory.errors import (
    BackendUnavailableError,
    ConfigurationError,
    TieredMemoryError,
    ValidationError,
    missing_extra,
)
from tiered_memory.policy import ArchivalPolicy
from tiered_memory.ports import Summarizer, Summary, SummaryRequest, TokenCounter

# the price table is kept in one place for every user of it (re-exported here)
from tiered_memory.pricing import DEFAULT_CLAUDE_MODEL, PRICING, ModelPricing, pricing_for

if TYPE_CHECKING:
    import anthropic

logger = logging.getLogger(__name__)

DEFAULT_MODEL = DEFAULT_CLAUDE_MODEL

# The seed-001 prompt, word for word: the archive was sized and priced around it.
SYSTEM_PROMPT = (
    "You are a memory archival assistant. Summarize the following memory "
    "into 2-3 sentences that preserve the core semantic meaning, key facts, "
    "names, dates, and actionable details. The summary must be useful for "
    "future retrieval via similarity search."
)

# Seed 001's per-memory averages, used to estimate cost before any call was made.
TYPICAL_INPUT_TOKENS = 430
TYPICAL_OUTPUT_TOKENS = 80


@dataclass(frozen=True)
class SummarizerUsage:
    """What the summariser has spent so far; a snapshot, safe to keep in a report."""

    calls: int = 0  # summaries Claude produced
    requests: int = 0  # HTTP attempts, retries included
    retries: int = 0
    failures: int = 0  # summarize() calls Claude could not serve (after retries)
    fallbacks: int = 0  # of those, served by the fallback summariser
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class CostEstimate:
    """What summarising some memories would cost; `dry_run` reports show this."""

    requests: int
    input_tokens: int
    output_tokens: int
    usd: float


class SummarizerResponseError(BackendUnavailableError):
    """Claude answered with a body that is not a usable Messages response."""


class SummarizerRequestError(TieredMemoryError):
    """Claude rejected this one request (400/413/422); other memories may still work."""


class RateLimiter:
    """Spaces requests `1/rate` seconds apart, allowing `burst` back to back.

    A virtual-scheduling token bucket: each caller reserves the next free slot
    synchronously (no await between reading and advancing it), so concurrent tasks
    never share a slot, and the waits are plain arithmetic a test can assert.
    """

    def __init__(
        self,
        rate_per_second: float,
        *,
        burst: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not rate_per_second > 0:
            raise ConfigurationError("rate_per_second must be positive")
        if burst < 1:
            raise ConfigurationError("burst must be at least 1")
        self.interval = 1.0 / rate_per_second
        self._tolerance = (burst - 1) * self.interval
        self._clock = clock
        self._sleep = sleep
        self._next_slot: float | None = None

    def reserve(self) -> float:
        """Take the next slot; returns how long the caller must wait for it."""
        now = self._clock()
        slot = now if self._next_slot is None else max(self._next_slot, now)
        wait = max(0.0, slot - self._tolerance - now)
        self._next_slot = slot + self.interval
        return wait

    async def acquire(self) -> float:
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
        return wait


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with "equal jitter": between half and all of base * 2**n.

    Half the delay is guaranteed so retries really back off; the random half keeps a
    batch of callers that failed together from retrying together. A server's
    Retry-After is honoured as a lower bound, capped at `max_retry_after`.
    """

    base_seconds: float = 0.5
    max_seconds: float = 20.0
    max_retry_after: float = 60.0

    def delay(self, retry: int, rng: random.Random, retry_after: float | None = None) -> float:
        ceiling = min(self.max_seconds, self.base_seconds * 2.0**retry)
        delay = ceiling / 2 + rng.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay


class AnthropicSummarizer:
    """The `Summarizer` port on Claude (a Haiku model by default) through `anthropic`.

    Pass `async_client=` (preferred) or a sync `client=`; otherwise an `AsyncAnthropic`
    is built on first use from `api_key`, else `ANTHROPIC_API_KEY`, and `base_url`.
    `fallback=` serves a memory whose call failed (rate limited past every retry,
    overloaded, malformed answer); without it the error is raised. Configuration
    errors (no key, bad key, unknown model) are always raised, never papered over.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        client: anthropic.Anthropic | None = None,
        async_client: anthropic.AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 200,
        rate_per_second: float = 10.0,
        burst: int = 1,
        max_retries: int = 4,
        backoff: Backoff | None = None,
        timeout: float = 30.0,
        fallback: Summarizer | None = None,
        pricing: ModelPricing | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if client is not None and async_client is not None:
            raise ConfigurationError("pass client= or async_client=, not both")
        if (client is not None or async_client is not None) and (api_key or base_url):
            raise ConfigurationError(
                "api_key= and base_url= configure a client built here; "
                "set them on the client you passed instead"
            )
        if not 1 <= max_tokens <= 4096:
            raise ConfigurationError("max_tokens must be in 1..4096 (a summary is 2-3 sentences)")
        if max_retries < 0:
            raise ConfigurationError("max_retries must be >= 0")
        if not timeout > 0:
            raise ConfigurationError("timeout must be positive (seconds)")
        self.model = model
        self.rate_per_second = rate_per_second
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self.backoff = backoff or Backoff()
        self.timeout = timeout
        self.fallback = fallback
        self.pricing = pricing or pricing_for(model)
        self._given_client = client
        self._given_async_client = async_client
        self._api_key = api_key
        self._base_url = base_url
        self._limiter = RateLimiter(rate_per_second, burst=burst, clock=clock, sleep=sleep)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._call: Callable[[dict[str, Any]], Awaitable[object]] | None = None
        self._owned_client: anthropic.AsyncAnthropic | None = None
        self._usage = SummarizerUsage()

    @classmethod
    def from_policy(cls, policy: ArchivalPolicy, **kwargs: Any) -> AnthropicSummarizer:
        """Take rate, retries and backoff base from an `ArchivalPolicy`."""
        kwargs.setdefault("rate_per_second", policy.summarizer_rate_per_second)
        kwargs.setdefault("max_retries", policy.max_retries)
        kwargs.setdefault("backoff", Backoff(base_seconds=policy.backoff_base_seconds))
        return cls(**kwargs)

    # -- the port ----------------------------------------------------------------------

    async def summarize(self, request: SummaryRequest) -> Summary:
        try:
            return await self._summarize_remote(request)
        except TieredMemoryError as e:
            self._add(failures=1)
            if self.fallback is None or isinstance(e, ConfigurationError):
                raise
            logger.warning("Claude summary failed (%s); using the fallback summariser", e)
            self._add(fallbacks=1)
            return await self.fallback.summarize(request)

    # -- accounting --------------------------------------------------------------------

    @property
    def usage(self) -> SummarizerUsage:
        return self._usage

    def reset_usage(self) -> SummarizerUsage:
        """Start counting afresh (one maintenance run); returns what was counted."""
        usage, self._usage = self._usage, SummarizerUsage()
        return usage

    def estimate_cost(
        self,
        requests: int | Sequence[SummaryRequest],
        *,
        token_counter: TokenCounter | None = None,
    ) -> CostEstimate:
        """What summarising `requests` memories would cost, before spending anything.

        Given the requests themselves, their prompts are counted (cl100k tokens, close
        to Claude's); given a number, the averages observed so far are used, or seed
        001's (430 in, 80 out) before the first call. Output is bounded by max_tokens.
        """
        usage = self._usage
        if usage.calls:
            avg_in = math.ceil(usage.input_tokens / usage.calls)
            avg_out = math.ceil(usage.output_tokens / usage.calls)
        else:
            avg_in, avg_out = TYPICAL_INPUT_TOKENS, TYPICAL_OUTPUT_TOKENS
        avg_out = min(avg_out, self.max_tokens)
        if isinstance(requests, int):
            if requests < 0:
                raise ValidationError("the number of requests must be >= 0")
            count, input_tokens = requests, requests * avg_in
        else:
            if token_counter is None:
                from tiered_memory.tokens import TiktokenCounter

                token_counter = TiktokenCounter()
            system = token_counter.count(SYSTEM_PROMPT)
            count = len(requests)
            input_tokens = sum(
                system + token_counter.count(user_message(r)) + _MESSAGE_OVERHEAD_TOKENS
                for r in requests
            )
        output_tokens = count * avg_out
        return CostEstimate(
            requests=count,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd=self.pricing.cost(input_tokens, output_tokens),
        )

    # -- requests ----------------------------------------------------------------------

    def build_params(self, request: SummaryRequest) -> dict[str, Any]:
        """The Messages API parameters for one memory (seed-001 prompt)."""
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": SYSTEM_PROMPT,
            "messages": [{"role": "user", "content": user_message(request)}],
        }

    async def _summarize_remote(self, request: SummaryRequest) -> Summary:
        sdk = _import_anthropic()
        call = self._caller(sdk)
        params = self.build_params(request)
        last_error: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                retry_after = _retry_after(last_error)
                await self._sleep(self.backoff.delay(attempt - 1, self._rng, retry_after))
                self._add(retries=1)
            await self._limiter.acquire()
            self._add(requests=1)
            try:
                message = await call(params)
            except sdk.APIStatusError as e:
                if not _retryable_status(e.status_code):
                    raise _status_error(e, self.model) from e
                last_error = e
            except sdk.APIConnectionError as e:  # includes APITimeoutError
                last_error = e
            except sdk.APIResponseValidationError as e:
                raise SummarizerResponseError(
                    f"Claude's response did not match the Messages schema: {e}"
                ) from e
            except sdk.AnthropicError as e:  # anything else the SDK raises on purpose
                raise BackendUnavailableError(
                    f"the Anthropic SDK failed ({type(e).__name__}: {e})"
                ) from e
            except (ValueError, TypeError, KeyError) as e:  # unparsable body (JSONDecodeError)
                raise SummarizerResponseError(
                    f"Claude's response body could not be parsed ({type(e).__name__}: {e}); "
                    "check base_url points at the Anthropic Messages API"
                ) from e
            else:
                return self._parse(message)
        raise BackendUnavailableError(
            f"Claude summariser gave up after {self.max_retries + 1} attempts "
            f"({_describe(last_error)}); retry later, lower rate_per_second, or pass "
            "fallback=ExtractiveSummarizer()"
        ) from last_error

    def _parse(self, message: object) -> Summary:
        """Read the summary out of a response the SDK may only have half-validated."""
        content = getattr(message, "content", None)
        if not isinstance(content, list):
            raise SummarizerResponseError(
                "Claude's response has no content list "
                f"(got {type(message).__name__}); check base_url points at the Messages API"
            )
        texts = [
            block.text
            for block in content
            if getattr(block, "type", None) == "text"
            and isinstance(getattr(block, "text", None), str)
        ]
        text = "\n".join(t.strip() for t in texts if t.strip())
        if not text:
            raise SummarizerResponseError("Claude's response holds no text block")
        if getattr(message, "stop_reason", None) == "max_tokens":
            text = _drop_unfinished_sentence(text)
        usage = getattr(message, "usage", None)
        input_tokens = _as_count(getattr(usage, "input_tokens", None))
        output_tokens = _as_count(getattr(usage, "output_tokens", None))
        if usage is None:
            logger.warning("Claude's response carries no usage; counting 0 tokens")
        model = getattr(message, "model", None)
        self._add(
            calls=1,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=self.pricing.cost(input_tokens, output_tokens),
        )
        return Summary(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model=model if isinstance(model, str) and model else self.model,
        )

    def _caller(self, sdk: Any) -> Callable[[dict[str, Any]], Awaitable[object]]:
        """One way to send a request, whichever client we were given; built once."""
        if self._call is not None:
            return self._call
        timeout = self.timeout
        if self._given_async_client is not None:
            async_client = self._given_async_client.with_options(max_retries=0)
        elif self._given_client is not None:
            sync_client = self._given_client.with_options(max_retries=0)

            async def call_sync(params: dict[str, Any]) -> object:
                create = functools.partial(sync_client.messages.create, **params, timeout=timeout)
                return await asyncio.to_thread(create)

            self._call = call_sync
            return call_sync
        else:
            api_key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not api_key:
                raise ConfigurationError(
                    "no Anthropic API key: set ANTHROPIC_API_KEY, or pass api_key= or "
                    "async_client= to AnthropicSummarizer"
                )
            async_client = sdk.AsyncAnthropic(
                api_key=api_key, base_url=self._base_url, max_retries=0, timeout=timeout
            )
            self._owned_client = async_client

        async def call_async(params: dict[str, Any]) -> object:
            return await async_client.messages.create(**params, timeout=timeout)

        self._call = call_async
        return call_async

    def _add(self, **deltas: float) -> None:
        current = self._usage
        self._usage = replace(
            current, **{name: getattr(current, name) + value for name, value in deltas.items()}
        )

    async def close(self) -> None:
        """Close the client built here; clients passed in belong to the caller."""
        if self._owned_client is not None:
            await self._owned_client.close()
            self._owned_client = None
            self._call = None


# -- helpers ---------------------------------------------------------------------------

# Role markers and framing the Messages API adds around the prompt text.
_MESSAGE_OVERHEAD_TOKENS = 10


def user_message(request: SummaryRequest) -> str:
    """The memory, then seed 001's context line (the memory type stands in for a domain)."""
    domain = request.domain or request.memory_type.value
    entities = ", ".join(e for e in request.entities if e.strip()) or "none"
    return f"{request.content}\n\nAdditional context - Domain: {domain}, Entities: {entities}"


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as e:
        raise missing_extra("anthropic", "anthropic") from e
    return anthropic


def _retryable_status(status: int) -> bool:
    # 408 request timeout, 409 lock conflict, 429 rate limited, 5xx incl. 529 overloaded.
    return status in (408, 409, 429) or status >= 500


def _status_error(error: Any, model: str) -> TieredMemoryError:
    status = error.status_code
    detail = getattr(error, "api_message", None) or str(error)
    if status in (401, 403):
        return ConfigurationError(
            f"Anthropic refused the credentials ({status}: {detail}); check ANTHROPIC_API_KEY"
        )
    if status == 404:
        return ConfigurationError(
            f"Anthropic does not know model {model!r} ({detail}); pass a current Haiku id, "
            f"e.g. model={DEFAULT_MODEL!r}"
        )
    return SummarizerRequestError(f"Claude rejected the summary request ({status}: {detail})")


def _retry_after(error: Exception | None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after seconds or date)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _describe(error: Exception | None) -> str:
    status = getattr(error, "status_code", None)
    name = type(error).__name__
    return f"last error: {status} {name}" if status else f"last error: {name}"


def _as_count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _drop_unfinished_sentence(text: str) -> str:
    """A reply cut off by max_tokens keeps its complete sentences, if it has any."""
    end = max(text.rfind(". "), text.rfind("! "), text.rfind("? "))
    if text.rstrip().endswith((".", "!", "?")):
        return text.rstrip()
    return text[: end + 1] if end > 0 else text


__all__ = [
    "DEFAULT_MODEL",
    "PRICING",
    "SYSTEM_PROMPT",
    "AnthropicSummarizer",
    "Backoff",
    "CostEstimate",
    "ModelPricing",
    "RateLimiter",
    "SummarizerRequestError",
    "SummarizerResponseError",
    "SummarizerUsage",
    "pricing_for",
    "user_message",
]
