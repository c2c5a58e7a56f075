"""The one word `qctl get workloads` and kueuectl's `list workload` say of a workload's state:
a stopped one (spec.active=false) says so until it finishes, whatever its cluster last said."""

from __future__ import annotations

from typing import Any

import pytest

from qctl.commands.resources import workload_status
from qctl.render import workload_state


def workload(*, active: bool = True, **conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "w"},
        "spec": {"active": active},
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason}
                for kind, reason in conditions.items()
            ]
        },
    }


@pytest.mark.parametrize(
    ("wl", "state", "status"),
    [
        (workload(), "Pending", "PENDING"),
        (workload(Admitted="Admitted"), "Admitted", "ADMITTED"),
        (workload(active=False), "Stopped", "STOPPED"),
        (workload(active=False, Evicted="Withdrawn"), "Stopped", "STOPPED"),
        (workload(Evicted="EvictedOnCluster"), "Evicted", "PENDING"),
        (workload(active=False, Finished="Succeeded"), "Succeeded", "FINISHED"),
    ],
    ids=["pending", "admitted", "stopped", "stopped-after-withdrawal", "evicted", "finished"],
)
def test_the_state_of_a_workload(wl: dict[str, Any], state: str, status: str) -> None:
    assert workload_state(wl) == state
    assert workload_status(wl) == status
