"""Start kubesim clusters in-process, for tests and other in-process users (federation e2e).

    from kubesim.testing import running

    async with running(clusters=2, nodes=4, runtime="process") as sim:
        sim.kubeconfig            # merged kubeconfig (one context per cluster)
        sim.kubeconfigs["sim-0"]  # per-cluster kubeconfig
        sim.urls["sim-0"]         # http://127.0.0.1:PORT
        sim.clusters[0]           # the kubesim.cluster.Cluster, for admin hooks

Clusters are named `sim-0`, `sim-1`, ... (or `names=[...]`), listen on ephemeral 127.0.0.1
ports, and write their kubeconfigs into a temporary directory removed on exit, together with
every process the process runtime started.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from kubesim.cluster import Cluster, ClusterConfig, Simulator
from kubesim.profile import NodeProfile

__all__ = ["RunningSimulator", "running"]


@dataclass(frozen=True)
class RunningSimulator:
    simulator: Simulator
    kubeconfig: Path
    kubeconfigs: dict[str, Path]
    urls: dict[str, str]

    @property
    def clusters(self) -> list[Cluster]:
        return self.simulator.clusters

    def cluster(self, name: str) -> Cluster:
        return self.simulator.cluster(name)


@asynccontextmanager
async def running(
    *,
    clusters: int = 1,
    nodes: int | None = None,
    profile: NodeProfile | None = None,
    names: Sequence[str] | None = None,
    runtime: str = "simulated",
    template: ClusterConfig | None = None,
    kubeconfig_dir: Path | None = None,
) -> AsyncIterator[RunningSimulator]:
    """Run `clusters` simulated clusters until the block exits.

    `nodes` overrides the profile's node count; `template` sets any other ClusterConfig field
    (its name, port, runtime and profile are replaced per cluster).
    """
    base = template or ClusterConfig()
    chosen = profile or base.profile
    if nodes is not None:
        chosen = chosen.with_total(nodes)
    cluster_names = list(names) if names is not None else [f"sim-{i}" for i in range(clusters)]
    configs = [
        replace(base, name=name, port=0, runtime=runtime, profile=chosen) for name in cluster_names
    ]
    with tempfile.TemporaryDirectory(prefix="kubesim-") as scratch:
        directory = kubeconfig_dir or Path(scratch)
        simulator = Simulator(configs, directory)
        await simulator.start()
        try:
            yield RunningSimulator(
                simulator=simulator,
                kubeconfig=simulator.merged_kubeconfig,
                kubeconfigs=dict(simulator.kubeconfigs),
                urls={c.config.name: c.url for c in simulator.clusters},
            )
        finally:
            await simulator.stop()
