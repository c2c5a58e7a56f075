"""Kubernetes calls are retried on transient errors only, counted and spaced as one sequence
whether or not the first attempt failed."""

from __future__ import annotations

import logging
import time

import pytest

from agent.errors import K8sConflictError, K8sServerError, K8sTooManyRequestsError
from agent.retry import k8s_call


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
    started = time.monotonic()
    assert await k8s_call("create job", fn, initial=0.01, maximum=0.02) == "ok"
    assert time.monotonic() - started >= 0.3
    assert fn.calls == 2
