"""The topology benchmark's simulator on a short stream over the 1,024-node profile: every
gang runs, required gangs stay in one domain, and no node ever holds more pods than GPUs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from bench.engine_topology import GPU, EngineRun, FirstFitRun, Gang, fabric, stream, summary


def test_a_short_stream_admits_every_gang_within_each_nodes_gpus() -> None:
    nodes = fabric()
    gangs = stream(120, 8192)
    run = EngineRun(gangs, nodes)
    on_node: Counter[str] = Counter()
    placed: dict[str, Mapping[str, int]] = {}

    def admit(t: float) -> list[tuple[Gang, Mapping[str, int]]]:
        out = run.admit(t)
        for gang, hosts in out:
            placed[gang.id] = hosts
            on_node.update(hosts)
            assert sum(hosts.values()) == gang.pods
        assert all(on_node[n] * 1000 <= nodes[n].allocatable[GPU] for n in on_node)
        return out

    def finished(gang: Gang) -> None:
        on_node.subtract(placed.pop(gang.id))
        EngineRun.finished(run, gang)

    run.finished = finished  # type: ignore[method-assign]
    run.go(admit)
    report = summary(run, gangs)
    assert report["never_admitted"] == 0
    assert report["required_in_one_domain"] == 1.0
    assert run.workloads == {}

    baseline = FirstFitRun(gangs, nodes)
    baseline.go(baseline.admit)
    assert summary(baseline, gangs)["required_in_one_domain"] == 1.0
