"""The agent's memory across restarts: held workloads in SQLite, the config in a file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.lease import LeaseTerms
from agent.records import Record, on_offer
from agent.state import StateStore
from api.v1alpha1.messages import DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import Workload


def _held(name: str, generation: int = 1) -> Record:
    workload = Workload.model_validate(
        {
            "metadata": {"name": name, "namespace": "team"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                    }
                ],
            },
        }
    )
    record = on_offer(None, DispatchOffer(workload=workload, generation=generation), 5.0).record
    assert record is not None
    return record


def _save(store: StateStore, record: Record, *, with_offer: bool = True) -> None:
    store.save(record.key, record.offer_json() if with_offer else None, record.state_json())


def test_held_workloads_come_back_after_a_restart(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    a = _held("a")
    b = replace(_held("b", generation=3), phase=WorkloadPhase.ADMITTED, job_names=("b-job",))
    store.save_many([(h.key, h.offer_json(), h.state_json()) for h in (a, b)])
    store.close()

    restored = {h.key: h for h in StateStore(tmp_path).load_all(Record.from_json)}

    assert set(restored) == {"team/a", "team/b"}
    assert restored["team/b"].generation == 3
    assert restored["team/b"].phase is WorkloadPhase.ADMITTED
    assert restored["team/b"].job_names == ("b-job",)
    assert restored["team/a"].offer.workload.spec == a.offer.workload.spec
    assert restored["team/a"].offered_at == 5.0


def test_a_state_update_keeps_the_stored_offer(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    held = _held("a")
    _save(store, held)
    _save(store, replace(held, phase=WorkloadPhase.SUCCEEDED), with_offer=False)

    (restored,) = StateStore(tmp_path).load_all(Record.from_json)

    assert restored.phase is WorkloadPhase.SUCCEEDED
    assert restored.offer.workload.metadata.name == "a"


def test_a_forgotten_workload_is_gone_after_a_restart(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    _save(store, _held("a"))
    _save(store, _held("b"))
    _save(store, _held("c"))
    store.forget("team/a")
    store.save_many([], forget=["team/c"])

    assert [h.key for h in StateStore(tmp_path).load_all(Record.from_json)] == ["team/b"]


def test_an_unreadable_row_is_skipped_and_the_others_load(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    _save(store, _held("good"))
    store.close()
    with sqlite3.connect(tmp_path / "held.db") as db:
        db.execute("INSERT INTO held (key, offer, state) VALUES ('team/bad', '{', '{}')")

    assert [h.key for h in StateStore(tmp_path).load_all(Record.from_json)] == ["team/good"]


def test_a_workload_admitted_but_not_yet_materialised_comes_back_pending(
    tmp_path: Path,
) -> None:
    # Saved in the pass that admitted it, before its Jobs existed: it is admitted again
    # after a restart, and the Jobs it may have got are adopted then.
    store = StateStore(tmp_path)
    held = _held("a")
    _save(store, replace(held, phase=WorkloadPhase.ADMITTED, job_names=()))

    (restored,) = StateStore(tmp_path).load_all(Record.from_json)

    assert restored.phase is WorkloadPhase.PENDING
    assert restored.workload.status is None


def test_the_last_lease_terms_are_kept_across_restarts(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    assert store.load_lease_terms() is None
    store.save_lease_terms(LeaseTerms(6.0, 4.0, enabled=False).to_json())

    text = StateStore(tmp_path).load_lease_terms()

    assert text is not None and LeaseTerms.from_json(text) == LeaseTerms(6.0, 4.0, False)


def test_a_batch_that_fails_midway_leaves_nothing_of_it(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    good = _held("good")

    def items() -> Iterator[tuple[str, str | None, str]]:
        yield good.key, good.offer_json(), good.state_json()
        raise RuntimeError("the pass died")

    with pytest.raises(RuntimeError):
        store.save_many(items())

    assert StateStore(tmp_path).load_all(Record.from_json) == []
