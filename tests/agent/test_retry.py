"""Kubernetes calls are retried on transient errors only, counted and spaced as one sequence
whether or not the first attempt failed; the hub is dialled again quickly early in an outage."""

from __future__ import annotations

import asyncio
import logging

import pytest
from tenacity import AsyncRetrying, RetryCallState

from agent.errors import K8sConflictError, K8sServerError, K8sTooManyRequestsError
from agent.retry import hub_reconnect, k8s_call


class Flaky:
    """Fails with the given errors, one per call, then answers "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


async def test_a_call_that_succeeds_is_made_once() -> None:
    fn = Flaky()
    assert await k8s_call("get thing", fn) == "ok"
    assert fn.calls == 1


async def test_transient_failures_are_retried_and_logged_as_attempts_of_one_sequence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fn = Flaky(K8sServerError("boom", status=503), K8sServerError("boom", status=500))
    with caplog.at_level(logging.INFO, logger="agent.retry"):
        assert await k8s_call("create job", fn, attempts=4, initial=0.01, maximum=0.02) == "ok"
    assert fn.calls == 3
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split(" failed")[0] for m in messages] == [
        "create job: attempt 1/4",
        "create job: attempt 2/4",
    ]


async def test_a_call_that_keeps_failing_makes_exactly_the_attempts_allowed() -> None:
    fn = Flaky(*(K8sServerError("boom", status=503) for _ in range(10)))
    with pytest.raises(K8sServerError):
        await k8s_call("create job", fn, attempts=3, initial=0.01, maximum=0.02)
    assert fn.calls == 3


async def test_an_error_a_retry_cannot_cure_is_raised_at_once() -> None:
    fn = Flaky(K8sConflictError("exists", status=409))
    with pytest.raises(K8sConflictError):
        await k8s_call("create job", fn)
    assert fn.calls == 1


async def test_a_first_attempt_refused_with_retry_after_waits_that_long() -> None:
    fn = Flaky(K8sTooManyRequestsError("slow down", status=429, retry_after=0.3))
    # On the clock the wait is timed by: uvloop reads its clock once per turn of the loop,
    # so time.monotonic() can be ahead of it (the wait once read 30 µs short of 0.3 s by it).
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await k8s_call("create job", fn, initial=0.01, maximum=0.02) == "ok"
    assert loop.time() - started >= 0.3
    assert fn.calls == 2


def _reconnect_wait(policy: AsyncRetrying, *, attempt: int, outage_seconds: float) -> float:
    """The pause `policy` takes before the next dial, `attempt` dials into an outage."""
    state = RetryCallState(policy, fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    state.outcome_timestamp = state.start_time + outage_seconds
    return float(policy.wait(state))


def test_reconnecting_to_the_hub_stays_quick_early_in_an_outage_then_backs_off_to_its_cap() -> None:
    policy = hub_reconnect(initial=0.5, maximum=30.0, quick_max=1.0, quick_for=60.0)

    # A change of leader or a hub restart: back within a second, however many dials failed.
    assert _reconnect_wait(policy, attempt=1, outage_seconds=0.1) <= 1.0
    assert _reconnect_wait(policy, attempt=12, outage_seconds=30.0) <= 1.0
    # A long outage: the capped exponential backoff.
    assert _reconnect_wait(policy, attempt=12, outage_seconds=61.0) == 30.0
