"""Effective pod requests are computed exactly as Kubernetes computes them: regular containers
and sidecars add up, a regular init container runs beside the sidecars started before it, the
pod needs the larger phase, pod-level requests replace the container sum, overhead is added,
and a limit alone counts as the request."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.k8s.pod import (
    Container,
    PodSpec,
    container_requests,
    effective_pod_requests,
    room_requests,
)
from api.quantity import Quantity


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def c(
    name: str,
    requests: dict[str, str] | None = None,
    *,
    sidecar: bool = False,
    limits: dict[str, str] | None = None,
    **req: str,
) -> Any:
    req = {**(requests or {}), **req}
    body: dict[str, Any] = {"name": name, "image": "busybox", "resources": {"requests": req}}
    if limits:
        body["resources"]["limits"] = limits
    if sidecar:
        body["restartPolicy"] = "Always"
    return body


def requests(**spec: Any) -> dict[str, Quantity]:
    return effective_pod_requests(PodSpec.model_validate(spec))


def test_regular_containers_add_up() -> None:
    assert requests(containers=[c("a", cpu="500m"), c("b", cpu="1500m", memory="1Gi")]) == {
        "cpu": q("2"),
        "memory": q("1Gi"),
    }


def test_a_larger_init_container_sets_the_pod_request() -> None:
    spec = {"initContainers": [c("init", cpu="4")], "containers": [c("a", cpu="1", memory="2Gi")]}
    assert requests(**spec) == {"cpu": q("4"), "memory": q("2Gi")}


def test_sidecars_run_beside_the_main_containers() -> None:
    spec = {
        "initContainers": [c("proxy", sidecar=True, cpu="250m")],
        "containers": [c("a", cpu="1")],
    }
    assert requests(**spec) == {"cpu": q("1250m")}


def test_an_init_container_runs_beside_the_sidecars_started_before_it() -> None:
    spec = {
        "initContainers": [
            c("proxy", sidecar=True, cpu="1"),
            c("migrate", cpu="3"),
            c("late-sidecar", sidecar=True, cpu="500m"),
        ],
        "containers": [c("a", cpu="1")],
    }
    # init phase of "migrate": 3 + 1 (proxy) = 4; running phase: 1 + 1 + 0.5 = 2.5
    assert requests(**spec) == {"cpu": q("4")}


def test_a_starting_sidecar_needs_itself_and_the_earlier_sidecars() -> None:
    spec = {
        "initContainers": [
            c("s1", sidecar=True, memory="1Gi"),
            c("s2", sidecar=True, memory="2Gi"),
        ],
        "containers": [c("a", cpu="1")],
    }
    assert requests(**spec) == {"cpu": q("1"), "memory": q("3Gi")}


def test_overhead_is_added_to_the_pod_request() -> None:
    spec = {"containers": [c("a", cpu="1")], "overhead": {"cpu": "100m", "memory": "64Mi"}}
    assert requests(**spec) == {"cpu": q("1100m"), "memory": q("64Mi")}


def test_a_limit_without_a_request_is_the_request() -> None:
    spec = {"containers": [c("a", cpu="1", limits={"cpu": "2", "nvidia.com/gpu": "1"})]}
    assert requests(**spec) == {"cpu": q("1"), "nvidia.com/gpu": q("1")}


def test_pod_level_requests_replace_the_container_sum_for_cpu_and_memory() -> None:
    spec = {
        "containers": [c("a", cpu="1", memory="1Gi"), c("b", {"cpu": "1", "nvidia.com/gpu": "2"})],
        "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "4Gi"}},
        "overhead": {"cpu": "100m"},
    }
    assert requests(**spec) == {"cpu": q("3100m"), "memory": q("4Gi"), "nvidia.com/gpu": q("2")}


def test_quantities_are_exact() -> None:
    spec = {"containers": [c("a", cpu="0.1"), c("b", cpu="0.2")]}
    assert requests(**spec)["cpu"] == q("300m")


# --- property -------------------------------------------------------------------------------

RESOURCES = ("cpu", "memory", "example.com/fpga")
amounts = st.integers(min_value=0, max_value=64_000).map(lambda m: f"{m}m")
resource_maps = st.dictionaries(st.sampled_from(RESOURCES), amounts, max_size=3)


@st.composite
def pod_specs(draw: st.DrawFn) -> PodSpec:
    regular = draw(st.lists(resource_maps, min_size=1, max_size=4))
    inits = draw(st.lists(st.tuples(resource_maps, st.booleans()), max_size=4))
    return PodSpec.model_validate(
        {
            "containers": [c(f"c{i}", r) for i, r in enumerate(regular)],
            "initContainers": [c(f"i{i}", r, sidecar=s) for i, (r, s) in enumerate(inits)],
        }
    )


def _at_least(have: dict[str, Quantity], want: dict[str, Quantity]) -> bool:
    return all(have.get(name, Quantity(0)) >= amount for name, amount in want.items())


@given(pod_specs())
def test_effective_requests_never_fall_below_an_init_container_or_the_running_containers(
    spec: PodSpec,
) -> None:
    effective = effective_pod_requests(spec)
    for init in spec.init_containers:
        assert _at_least(effective, container_requests(init))
    running: dict[str, Quantity] = {}
    members: list[Container] = [
        *spec.containers,
        *(i for i in spec.init_containers if i.is_sidecar),
    ]
    for member in members:
        for name, amount in container_requests(member).items():
            running[name] = running.get(name, Quantity(0)) + amount
    assert _at_least(effective, running)


# --- the room a placed pod holds, read from its wire form ---------------------------------

spellings = st.one_of(
    amounts,
    st.integers(min_value=0, max_value=64).map(str),
    st.integers(min_value=0, max_value=64).map(lambda g: f"{g}Gi"),
    st.sampled_from(["0.5", "1.25", "1e3", "100Mi", "2k"]),
)
wire_maps = st.dictionaries(st.sampled_from(RESOURCES), spellings, max_size=3)


@st.composite
def wire_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Pod specs as the API server sends them: containers with requests and limits, now and
    then init containers, pod-level resources or overhead (which the full model reads)."""
    containers = [
        c(f"c{i}", r, limits=draw(wire_maps) or None)
        for i, r in enumerate(draw(st.lists(wire_maps, min_size=1, max_size=3)))
    ]
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Never"}
    if draw(st.integers(0, 5)) == 0:
        spec["initContainers"] = [c("init", draw(wire_maps))]
    if draw(st.integers(0, 5)) == 0:
        spec["overhead"] = draw(wire_maps)
    if draw(st.integers(0, 5)) == 0:
        spec["resources"] = {"requests": {"cpu": "1"}}
    return spec


@given(wire_specs())
def test_the_room_a_pod_holds_is_its_effective_requests_in_milli_units_and_one_pod(
    spec: dict[str, Any],
) -> None:
    expected = {n: amount.milli() for n, amount in requests(**spec).items()}
    assert room_requests(spec) == {**expected, "pods": 1000}


def test_a_pod_whose_requests_cannot_be_read_counts_as_its_one_pod() -> None:
    for bad in ("lots", "1" * 70, "99999999999999999999"):
        spec = {"containers": [c("a", cpu=bad)], "restartPolicy": "Never"}
        assert room_requests(spec) == {"pods": 1000}
