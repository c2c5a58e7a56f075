"""Hub ↔ agent messages: every type round-trips through JSON in its envelope, the envelope's
type and the payload's agree, and the objects carried are validated with envelope paths."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from api.logstamps import stamp_of
from api.quantity import Quantity
from api.v1alpha1.messages import (
    AGENT_TO_HUB,
    HUB_TO_AGENT,
    Ack,
    Bind,
    Cancel,
    CapacityReport,
    ConfigSync,
    ContainerExit,
    DispatchOffer,
    Envelope,
    HeldWorkload,
    Hello,
    InventorySummary,
    LeaseGrant,
    LeaseRenew,
    LogClose,
    LogData,
    LogLine,
    LogOpen,
    MessageInvalidError,
    MessageType,
    NamespaceLabels,
    NodeSummary,
    OfferRejected,
    Payload,
    PodCounts,
    QueueCapacity,
    RejectReason,
    TraceContext,
    Withdraw,
    WorkloadPhase,
    WorkloadStatusReport,
)
from api.v1alpha1.queues import ClusterQueue, ResourceFlavor
from api.v1alpha1.workload import Workload

NOW = datetime(2026, 12, 2, 15, 0, tzinfo=UTC)
Q = Quantity.parse


def workload() -> Workload:
    return Workload.model_validate(
        {
            "metadata": {"name": "job-sweep", "namespace": "vision"},
            "spec": {
                "queueName": "vision",
                "podSets": [
                    {
                        "name": "main",
                        "count": 4,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "busybox",
                                        "resources": {"requests": {"cpu": "500m"}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
    )


EXAMPLES: list[Payload] = [
    Hello(
        cluster="gpu-east",
        agent_version="0.1.0",
        config_revision=7,
        inventory=InventorySummary(
            kubernetes_version="v1.31.2",
            nodes=10,
            ready_nodes=9,
            allocatable={"cpu": Q("640"), "nvidia.com/gpu": Q("80")},
            flavors=["gpu-a100"],
        ),
        workloads=[
            HeldWorkload(workload="vision/job-sweep", generation=3, phase=WorkloadPhase.RUNNING)
        ],
    ),
    CapacityReport(
        cluster="gpu-east",
        observed_at=NOW,
        queues=[
            QueueCapacity(
                cluster_queue="team-vision",
                flavor="gpu-a100",
                resource="nvidia.com/gpu",
                nominal=Q("16"),
                usage=Q("12"),
                headroom=Q("4"),
            )
        ],
        nodes=NodeSummary(total=10, ready=9, schedulable=9, free={"memory": Q("1.5Ti")}),
    ),
    WorkloadStatusReport(
        workload="vision/job-sweep",
        generation=3,
        phase=WorkloadPhase.FAILED,
        observed_at=NOW,
        pods=PodCounts(running=3, ready=3, failed=1),
        exits=[
            ContainerExit(pod="sweep-2-abcde", container="trial", exit_code=137, reason="OOMKilled")
        ],
        pending_reason=None,
    ),
    LogData(
        stream_id="s1",
        workload="vision/job-sweep",
        cluster="gpu-east",
        pod="sweep-0-xyz",
        container="trial",
        lines=[
            LogLine(timestamp=stamp_of(NOW), text="epoch 1 loss=0.3"),
            LogLine(text="no timestamp"),
        ],
        dropped=12,
        eof=True,
    ),
    OfferRejected(
        workload="vision/job-sweep",
        generation=4,
        reason=RejectReason.NO_SUCH_QUEUE,
        message="no LocalQueue vision/vision",
    ),
    ConfigSync(
        revision=8,
        resource_flavors=[ResourceFlavor.model_validate({"metadata": {"name": "gpu-a100"}})],
        cluster_queues=[ClusterQueue.model_validate({"metadata": {"name": "team-vision"}})],
    ),
    DispatchOffer(workload=workload(), generation=4),
    DispatchOffer(workload=workload(), generation=5, bound=False, reservation_timeout_seconds=20),
    Bind(workload="vision/job-sweep", generation=5),
    WorkloadStatusReport(workload="vision/job-sweep", generation=5, phase=WorkloadPhase.RESERVED),
    LeaseRenew(id=7),
    LeaseGrant(id=7, lease_seconds=60, grace_seconds=30),
    Withdraw(workload="vision/job-sweep", generation=4, reason="ClusterLost"),
    Cancel(workload="vision/job-sweep", generation=4, reason="UserCancelled", message="by alice"),
    LogOpen(stream_id="s1", workload="vision/job-sweep", follow=True, tail_lines=100, pod="p"),
    LogClose(stream_id="s1", reason="client went away"),
]


@pytest.mark.parametrize("payload", EXAMPLES, ids=lambda p: f"{p.type}")
def test_every_message_round_trips_through_json(payload: Payload) -> None:
    envelope = Envelope.wrap(
        payload, seq=42, ack=41, trace_context=TraceContext(traceparent="00-abc-def-01")
    )
    text = envelope.to_json()
    again = Envelope.from_json(text)
    assert again == envelope
    assert again.to_json() == text
    assert again.type == payload.type


def test_an_ack_round_trips_and_must_say_what_it_acknowledges() -> None:
    envelope = Envelope.wrap(Ack(), seq=5, ack=9)
    assert Envelope.from_json(envelope.to_json()) == envelope
    with pytest.raises(ValidationError, match="an Ack must carry `ack`"):
        Envelope.from_json('{"type": "Ack", "seq": 1, "payload": {}}')


def test_wrapping_checks_what_validation_would_without_validating_the_payload_again() -> None:
    with pytest.raises(ValueError, match="an Ack must carry `ack`"):
        Envelope.wrap(Ack(), seq=1)
    with pytest.raises(ValueError, match="never negative"):
        Envelope.wrap(LogClose(stream_id="s"), seq=-1)
    envelope = Envelope.wrap(LogClose(stream_id="s"), seq=3, ack=2)
    assert Envelope.from_json(envelope.to_json()) == envelope


def test_every_message_type_has_a_direction() -> None:
    assert set(MessageType) == AGENT_TO_HUB | HUB_TO_AGENT
    assert {MessageType.ACK} == AGENT_TO_HUB & HUB_TO_AGENT


def test_the_payload_takes_its_type_from_the_envelope() -> None:
    text = '{"protocolVersion": 2, "type": "LogClose", "seq": 3, "payload": {"streamId": "s"}}'
    envelope = Envelope.from_json(text)
    assert isinstance(envelope.payload, LogClose)


@pytest.mark.parametrize("payload", EXAMPLES, ids=lambda p: f"{p.type}")
def test_every_payload_without_its_type_takes_the_envelope_s_from_text_and_from_data(
    payload: Payload,
) -> None:
    envelope = Envelope.wrap(payload, seq=42, ack=41)
    data = json.loads(envelope.to_json())
    del data["payload"]["type"]
    assert Envelope.decode(json.dumps(data)) == envelope
    assert Envelope.decode_from_peer(json.dumps(data)) == (envelope, ())
    assert Envelope.model_validate(data) == envelope
    assert "type" not in data["payload"]  # (the caller's data is left as it was)


def test_a_payload_without_its_type_is_still_checked_field_by_field() -> None:
    text = '{"type": "Cancel", "seq": 1, "payload": {"workload": "a/b", "generation": 0}}'
    with pytest.raises(MessageInvalidError) as info:
        Envelope.decode(text)
    assert sorted(e.path for e in info.value.errors) == ["payload.generation", "payload.reason"]


def test_a_message_that_names_no_type_at_all_is_refused_at_its_type() -> None:
    with pytest.raises(MessageInvalidError) as info:
        Envelope.decode('{"seq": 1, "payload": {"streamId": "s"}}')
    assert "type" in [e.path for e in info.value.errors]


def test_envelope_and_payload_types_must_agree() -> None:
    text = '{"type": "LogOpen", "seq": 3, "payload": {"type": "LogClose", "streamId": "s"}}'
    with pytest.raises(ValidationError, match="does not match"):
        Envelope.from_json(text)


def test_an_unsupported_protocol_version_is_refused() -> None:
    text = '{"protocolVersion": 1, "type": "Ack", "seq": 1, "ack": 0, "payload": {}}'
    with pytest.raises(ValidationError, match="unsupported protocol version 1"):
        Envelope.from_json(text)


def test_unknown_fields_in_a_message_are_rejected_with_their_path() -> None:
    text = '{"type": "LogClose", "seq": 1, "payload": {"streamId": "s", "bogus": 1}}'
    with pytest.raises(MessageInvalidError) as info:
        Envelope.decode(text)
    assert [str(e) for e in info.value.errors] == [
        "payload.bogus: Unknown field: this field is not part of the schema"
    ]


def test_workload_keys_are_namespace_slash_name() -> None:
    body: dict[str, Any] = {
        "type": "Withdraw",
        "seq": 1,
        "payload": {"workload": "job-sweep", "generation": 1, "reason": "x"},
    }
    with pytest.raises(ValidationError):
        Envelope.model_validate(body)


def test_generations_start_at_one() -> None:
    body: dict[str, Any] = {
        "type": "Cancel",
        "seq": 1,
        "payload": {"workload": "a/b", "generation": 0, "reason": "x"},
    }
    with pytest.raises(ValidationError):
        Envelope.model_validate(body)


def test_objects_carried_are_validated_with_envelope_paths() -> None:
    cq = ClusterQueue.model_validate(
        {
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "-1"}]}
                        ],
                    }
                ]
            },
        }
    )
    envelope = Envelope.wrap(ConfigSync(revision=1, cluster_queues=[cq]), seq=1)
    assert [str(e) for e in envelope.semantic_errors()] == [
        "payload.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        'Invalid value: "-1": must be greater than or equal to 0'
    ]
    offer = workload()
    offer.spec.queue_name = ""
    envelope = Envelope.wrap(DispatchOffer(workload=offer, generation=1), seq=2)
    with pytest.raises(MessageInvalidError) as info:
        Envelope.decode(envelope.to_json())
    assert [str(e) for e in info.value.errors] == [
        "payload.workload.spec.queueName: Required value"
    ]


def test_pushed_namespace_labels_are_checked_as_kubernetes_checks_names_and_labels() -> None:
    good = NamespaceLabels(name="vision", labels={"multiq.dev/tenant": "vision"})
    bad = NamespaceLabels(name="Vision_1", labels={"multiq.dev/tenant": "no spaces"})
    envelope = Envelope.wrap(ConfigSync(revision=1, namespaces=[good, bad]), seq=1)
    paths = sorted({e.path for e in envelope.semantic_errors()})
    assert paths == [
        "payload.namespaces[1].labels[multiq.dev/tenant]",
        "payload.namespaces[1].name",
    ]


def test_log_open_since_and_since_seconds_are_exclusive() -> None:
    payload = LogOpen(stream_id="s", workload="a/b", since=NOW, since_seconds=60)
    assert [str(e) for e in Envelope.wrap(payload, seq=1).semantic_errors()] == [
        "payload.sinceSeconds: Forbidden: may not be set together with since"
    ]


# --- property -------------------------------------------------------------------------------

keys = st.from_regex(r"\A[a-z][a-z0-9-]{0,8}[a-z0-9]/[a-z][a-z0-9.-]{0,8}[a-z0-9]\Z")
times = st.datetimes(timezones=st.just(UTC))


@st.composite
def payloads(draw: st.DrawFn) -> Payload:
    kind = draw(st.sampled_from(["log", "status", "withdraw"]))
    if kind == "log":
        return LogData(
            stream_id=draw(st.text(max_size=8)),
            workload=draw(keys),
            cluster="c",
            pod=draw(st.text(max_size=8)),
            container="main",
            lines=draw(
                st.lists(
                    st.builds(
                        LogLine,
                        timestamp=st.none() | times.map(stamp_of),
                        text=st.text(max_size=40),
                    ),
                    max_size=5,
                )
            ),
            dropped=draw(st.integers(min_value=0, max_value=10**6)),
            eof=draw(st.booleans()),
        )
    if kind == "status":
        return WorkloadStatusReport(
            workload=draw(keys),
            generation=draw(st.integers(min_value=1, max_value=2**40)),
            phase=draw(st.sampled_from(list(WorkloadPhase))),
            observed_at=draw(st.none() | times),
            pods=PodCounts(running=draw(st.integers(0, 1000)), failed=draw(st.integers(0, 1000))),
            exits=[
                ContainerExit(
                    pod="p", container="c", exit_code=draw(st.integers(-255, 255)), reason="R"
                )
            ],
            pending_reason=draw(st.none() | st.text(max_size=20)),
        )
    return Withdraw(
        workload=draw(keys),
        generation=draw(st.integers(min_value=1, max_value=2**40)),
        reason=draw(st.text(max_size=20)),
    )


@given(payloads(), st.integers(min_value=0, max_value=2**53), st.none() | st.integers(0, 2**53))
def test_random_messages_round_trip_through_json(
    payload: Payload, seq: int, ack: int | None
) -> None:
    envelope = Envelope.wrap(payload, seq=seq, ack=ack)
    assert Envelope.decode(envelope.to_json()) == envelope


def test_cluster_names_in_agent_messages_are_dns_names() -> None:
    envelope = Envelope.wrap(Hello(cluster="GPU East", agent_version="0.1.0"), seq=1)
    (error,) = envelope.semantic_errors()
    assert str(error).startswith('payload.cluster: Invalid value: "GPU East": a lowercase RFC 1123')


def test_an_offer_is_bound_unless_it_says_it_asks_for_a_reservation() -> None:
    offer = DispatchOffer.model_validate({"workload": workload().to_wire(), "generation": 1})
    assert offer.bound
    request = DispatchOffer.model_validate(
        {"workload": workload().to_wire(), "generation": 1, "bound": False}
    )
    assert not request.bound
    assert request.reservation_timeout_seconds == 30


@pytest.mark.parametrize("with_source", [True, False])
def test_an_envelope_written_with_members_already_encoded_decodes_to_the_same_message(
    with_source: bool,
) -> None:
    source = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}}
    offer = DispatchOffer(
        workload=workload(),
        generation=2,
        source=source if with_source else None,
        bound=False,
        reservation_timeout_seconds=45,
    )
    envelope = Envelope.wrap(
        offer, seq=7, ack=3, trace_context=TraceContext(traceparent="00-abc-def-01")
    )
    encoded = {"workload": json.dumps(workload().to_wire())}
    if with_source:
        encoded["source"] = json.dumps(source)
    text = envelope.to_json(encoded)
    assert Envelope.decode(text) == Envelope.decode(envelope.to_json())
    assert json.loads(text) == json.loads(envelope.to_json())


def test_encoded_members_are_written_as_given_not_encoded_again() -> None:
    offer = DispatchOffer(workload=workload(), generation=1)
    text = Envelope.wrap(offer, seq=1).to_json({"workload": '{"made":"elsewhere"}'})
    assert json.loads(text)["payload"]["workload"] == {"made": "elsewhere"}
    assert json.loads(text)["payload"]["reservationTimeoutSeconds"] == 30


def test_a_lease_grant_names_positive_durations() -> None:
    with pytest.raises(ValidationError, match="leaseSeconds"):
        LeaseGrant.model_validate({"id": 1, "leaseSeconds": 0, "graceSeconds": 1})


def test_a_newer_peers_unknown_fields_are_dropped_and_named_when_decoded_from_the_wire() -> None:
    text = (
        '{"type": "LogClose", "seq": 1, "newEnvelopeField": true,'
        ' "payload": {"streamId": "s", "bogus": 1}}'
    )
    envelope, dropped = Envelope.decode_from_peer(text)
    assert isinstance(envelope.payload, LogClose)
    assert envelope.payload.stream_id == "s"
    assert sorted(dropped) == ["newEnvelopeField", "payload.bogus"]


def test_a_newer_peers_unknown_field_deep_in_a_report_is_dropped_with_its_path() -> None:
    body = {
        "type": "WorkloadStatus",
        "seq": 2,
        "payload": {
            "workload": "team/job-a",
            "generation": 1,
            "phase": "Running",
            "pods": {"running": 1, "newCount": 4},
        },
    }
    envelope, dropped = Envelope.decode_from_peer(json.dumps(body))
    assert envelope.type is MessageType.WORKLOAD_STATUS
    assert dropped == ("payload.pods.newCount",)


def test_a_message_wrong_in_more_than_unknown_fields_is_still_refused_from_the_wire() -> None:
    text = '{"type": "LogClose", "seq": 1, "payload": {"bogus": 1}}'  # streamId missing
    with pytest.raises(MessageInvalidError) as info:
        Envelope.decode_from_peer(text)
    assert any(e.path == "payload.streamId" for e in info.value.errors)


def test_a_message_without_unknown_fields_decodes_from_the_wire_with_nothing_dropped() -> None:
    text = '{"type": "LogClose", "seq": 1, "payload": {"streamId": "s"}}'
    envelope, dropped = Envelope.decode_from_peer(text)
    assert isinstance(envelope.payload, LogClose) and dropped == ()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(
    kind=st.sampled_from([t.value for t in MessageType]),
    fields=st.dictionaries(
        st.sampled_from(["workload", "generation", "reason", "streamId", "lines", "phase", "x"]),
        json_values,
        max_size=4,
    ),
)
def test_a_message_whose_payload_names_no_type_decodes_or_is_refused_as_invalid(
    kind: str, fields: dict[str, Any]
) -> None:
    text = json.dumps({"type": kind, "seq": 1, "ack": 0, "payload": fields})
    try:
        envelope = Envelope.decode(text)
    except MessageInvalidError:
        return
    assert envelope.type.value == kind
