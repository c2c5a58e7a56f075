"""`qctl get tenants` prints the fleet's fair share as `sshare -l` does (each tenant, then its
users in the Fair Tree's order), and `qctl describe workload` names the workload's tenant,
submitter and factor."""

from __future__ import annotations

from typing import Any

from qctl.commands.resources import describe_workload, fair_share_of
from qctl.render import render

TENANTS: list[dict[str, Any]] = [
    {
        "metadata": {"name": "audio"},
        "spec": {"namespaces": ["audio"], "fairSharingWeight": "30"},
        "status": {
            "fairShare": {
                "rawShares": 30.0,
                "normShares": 0.3,
                "rawUsage": 30.0,
                "effectiveUsage": 0.143,
                "levelFs": 2.1,
                "users": [
                    {"name": "carol", "factor": 1.0},
                    {
                        "name": "bob",
                        "rawUsage": 30.0,
                        "effectiveUsage": 1.0,
                        "levelFs": 0.5,
                        "factor": 0.75,
                    },
                ],
            }
        },
    },
    {
        "metadata": {"name": "vision"},
        "spec": {"namespaces": ["vision"], "fairSharingWeight": "70"},
    },
]


def test_get_tenants_prints_a_row_per_tenant_and_per_user_like_sshare() -> None:
    lines = render(TENANTS, kind="Tenant", output="table").splitlines()
    assert lines[0].split() == [
        "TENANT",
        "USER",
        "SHARES",
        "NORM-SHARES",
        "RAW-USAGE",
        "EFFECTIVE-USAGE",
        "FAIRSHARE",
        "LEVEL-FS",
    ]
    assert [line.split() for line in lines[1:]] == [
        ["audio", "30", "0.3", "30", "0.143", "2.1"],
        ["audio", "carol", "1", "0", "0", "1", "inf"],
        ["audio", "bob", "1", "30", "1", "0.75", "0.5"],
        ["vision", "70", "-", "-", "-", "-"],
    ]


def test_describe_names_the_tenant_the_submitter_and_the_factor() -> None:
    wl = {
        "metadata": {
            "name": "train",
            "namespace": "audio",
            "annotations": {"multiq.dev/submitted-by": "bob"},
        },
        "spec": {"queueName": "audio"},
    }
    shown = fair_share_of(wl, TENANTS)
    assert shown == "audio/bob: factor 0.75"
    assert "Fair share:    audio/bob: factor 0.75" in describe_workload(wl, fair_share=shown)


def test_a_submitter_with_no_usage_yet_has_the_top_factor_and_no_tenant_means_none() -> None:
    new = {"metadata": {"namespace": "vision", "annotations": {"multiq.dev/submitted-by": "x"}}}
    assert fair_share_of(new, TENANTS) == "vision/x: factor 1 (no usage yet)"
    assert fair_share_of({"metadata": {"namespace": "elsewhere"}}, TENANTS) is None
