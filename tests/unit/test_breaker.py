"""The graph circuit breaker: open after a failure, half-open after the cool-down."""

from __future__ import annotations

from tiered_memory.breaker import CircuitBreaker


def test_breaker_opens_on_failure_and_closes_after_cooldown() -> None:
    now = [100.0]
    breaker = CircuitBreaker(30.0, clock=lambda: now[0])
    assert breaker.allow()
    breaker.failed(ConnectionError("refused"))
    assert not breaker.allow()
    assert "refused" in breaker.skipped_reason()
    now[0] += 29.9
    assert not breaker.allow()
    now[0] += 0.2
    assert breaker.allow()  # one call may try again
    breaker.succeeded()
    assert breaker.allow()
    assert breaker.last_error is None


def test_zero_cooldown_never_skips() -> None:
    breaker = CircuitBreaker(0.0)
    breaker.failed(RuntimeError("x"))
    assert breaker.allow()
