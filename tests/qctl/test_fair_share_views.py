"""`qctl get tenants` prints the fleet's fair share as `sshare -l` does (each tenant, then its
GlobalQueues as sub-accounts, then their users, in the Fair Tree's order), and `qctl describe
workload` names the workload's tenant, queue, submitter and factor."""

from __future__ import annotations

import itertools
from typing import Any

from api.v1alpha1.federation import GlobalQueue
from hub.placement.routing import Routing
from qctl.commands.resources import describe_workload, fair_share_of, global_queue_of
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
    {
        "metadata": {"name": "video"},
        "spec": {"namespaces": ["video"], "fairSharingWeight": "10"},
        "status": {
            "fairShare": {
                "rawShares": 10.0,
                "normShares": 0.1,
                "rawUsage": 1000.0,
                "effectiveUsage": 0.5,
                "levelFs": 0.2,
                "queues": [
                    {
                        "name": "big",
                        "rawShares": 3.0,
                        "normShares": 0.75,
                        "rawUsage": 600.0,
                        "effectiveUsage": 0.6,
                        "levelFs": 1.25,
                    },
                    {
                        "name": "small",
                        "rawShares": 1.0,
                        "normShares": 0.25,
                        "rawUsage": 400.0,
                        "effectiveUsage": 0.4,
                        "levelFs": 0.625,
                    },
                ],
                "users": [
                    {
                        "name": "dan",
                        "queue": "big",
                        "rawUsage": 600.0,
                        "effectiveUsage": 1.0,
                        "levelFs": 1.0,
                        "factor": 1.0,
                    },
                    {
                        "name": "dan",
                        "queue": "small",
                        "rawUsage": 400.0,
                        "effectiveUsage": 1.0,
                        "levelFs": 1.0,
                        "factor": 0.5,
                    },
                ],
            }
        },
    },
]


def test_get_tenants_prints_a_row_per_tenant_and_per_user_like_sshare() -> None:
    lines = render(TENANTS, kind="Tenant", output="table").splitlines()
    assert lines[0].split() == [
        "TENANT",
        "QUEUE",
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
        ["video", "10", "0.1", "1000", "0.5", "0.2"],
        ["video", "big", "3", "0.75", "600", "0.6", "1.25"],
        ["video", "big", "dan", "1", "600", "1", "1", "1"],
        ["video", "small", "1", "0.25", "400", "0.4", "0.625"],
        ["video", "small", "dan", "1", "400", "1", "0.5", "1"],
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


def test_describe_names_the_global_queue_the_workload_goes_through() -> None:
    wl = {
        "metadata": {
            "name": "render",
            "namespace": "video",
            "annotations": {"multiq.dev/submitted-by": "dan"},
        },
        "spec": {"queueName": "fast"},
    }
    local_queues = [
        {"metadata": {"name": "fast", "namespace": "video"}, "spec": {"clusterQueue": "b"}}
    ]
    global_queues = [
        {"metadata": {"name": "small"}, "spec": {"clusterQueues": ["b"]}},
        {"metadata": {"name": "big"}, "spec": {"clusterQueues": ["a"]}},
    ]
    queue = global_queue_of(wl, TENANTS, local_queues, global_queues)
    assert queue == "small"
    assert fair_share_of(wl, TENANTS, queue=queue) == "video/small/dan: factor 0.5"
    # The queue not known (local queues unreadable): both of the submitter's rows.
    assert fair_share_of(wl, TENANTS) == "video/dan: factors big 1.0, small 0.5"


def test_a_workload_no_global_queue_governs_has_no_queue() -> None:
    wl = {"metadata": {"namespace": "video"}, "spec": {"queueName": "fast"}}
    local_queues = [
        {"metadata": {"name": "fast", "namespace": "video"}, "spec": {"clusterQueue": "b"}}
    ]
    only_a = [{"metadata": {"name": "big"}, "spec": {"clusterQueues": ["a"]}}]
    assert global_queue_of(wl, TENANTS, local_queues, only_a) == ""
    assert global_queue_of(wl, TENANTS, [], only_a) is None


def test_qctl_names_the_global_queue_the_hub_routes_by_in_every_combination() -> None:
    # qctl does not import the hub: its copy of the rule is checked against the hub's over
    # every way three GlobalQueues can name (or not) the cluster queue and the tenant.
    wl = {"metadata": {"namespace": "video"}, "spec": {"queueName": "fast"}}
    local_queues = [
        {"metadata": {"name": "fast", "namespace": "video"}, "spec": {"clusterQueue": "b"}}
    ]
    owners = {t["metadata"]["name"] for t in TENANTS if "video" in t["spec"]["namespaces"]}
    choices = [
        {},
        {"clusterQueues": ["b"]},
        {"clusterQueues": ["a"]},
        {"tenants": sorted(owners)},
        {"tenants": ["nobody"]},
        {"clusterQueues": ["b"], "tenants": sorted(owners)},
    ]
    for specs in itertools.product(choices, repeat=3):
        wire = [
            {"metadata": {"name": f"q{i}"}, "spec": {"clusterSet": "all", **s}}
            for i, s in enumerate(specs)
        ]
        routing = Routing.of(
            local_queues=[],
            global_queues=[GlobalQueue.model_validate(g) for g in wire],
            tenants=[],
            cluster_sets=[],
            members=[],
        )
        hub = routing.governing_queue("b", owners)
        assert global_queue_of(wl, TENANTS, local_queues, wire) == (hub.name if hub else ""), specs
