"""Labelled Prometheus children looked up once: prometheus_client's `labels()` checks and
converts its values and takes a lock at every call, and the hub's and the agent's hooks run
for every write, report, request and record change.

Called by: hub.metrics, agent.metrics.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client.metrics import MetricWrapperBase

__all__ = ["Children"]

M = TypeVar("M", bound=MetricWrapperBase)


class Children:
    """`metric.labels(*values)`, kept per metric and values. Children are never removed
    here, so a kept one stays the one the registry serves."""

    def __init__(self) -> None:
        self._kept: dict[tuple[MetricWrapperBase, tuple[str, ...]], MetricWrapperBase] = {}

    def __call__(self, metric: M, *values: str) -> M:
        key = (metric, values)
        child = self._kept.get(key)
        if child is None:
            child = self._kept[key] = metric.labels(*values)
        return child  # type: ignore[return-value]
