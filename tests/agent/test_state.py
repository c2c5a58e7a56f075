"""The agent's memory across restarts: held workloads in SQLite, the config in a file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.state import Held, StateStore
from api.v1alpha1.messages import DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import Workload


def _held(name: str, generation: int = 1) -> Held:
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
    return Held(offer=DispatchOffer(workload=workload, generation=generation), offered_at=5.0)


def test_held_workloads_come_back_after_a_restart(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    a, b = _held("a"), _held("b", generation=3)
    b.phase, b.job_names = WorkloadPhase.ADMITTED, ["b-job"]
    store.save_many([(h.key, h.offer_json(), h.state_json()) for h in (a, b)])
    store.close()

    restored = {h.key: h for h in StateStore(tmp_path).load_all()}

    assert set(restored) == {"team/a", "team/b"}
    assert restored["team/b"].generation == 3
    assert restored["team/b"].phase is WorkloadPhase.ADMITTED
    assert restored["team/b"].job_names == ["b-job"]
    assert restored["team/a"].offer.workload.spec == a.offer.workload.spec


def test_a_state_update_keeps_the_stored_offer(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    held = _held("a")
    store.save(held)
    held.phase = WorkloadPhase.SUCCEEDED
    store.save(held, with_offer=False)

    (restored,) = StateStore(tmp_path).load_all()

    assert restored.phase is WorkloadPhase.SUCCEEDED
    assert restored.offer.workload.metadata.name == "a"


def test_a_forgotten_workload_is_gone_after_a_restart(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(_held("a"))
    store.save(_held("b"))
    store.forget("team/a")

    assert [h.key for h in StateStore(tmp_path).load_all()] == ["team/b"]


def test_an_unreadable_row_is_skipped_and_the_others_load(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(_held("good"))
    store.close()
    with sqlite3.connect(tmp_path / "held.db") as db:
        db.execute("INSERT INTO held (key, offer, state) VALUES ('team/bad', '{', '{}')")

    assert [h.key for h in StateStore(tmp_path).load_all()] == ["team/good"]


def test_a_batch_that_fails_midway_leaves_nothing_of_it(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    good = _held("good")

    def items() -> Iterator[tuple[str, str | None, str]]:
        yield good.key, good.offer_json(), good.state_json()
        raise RuntimeError("the pass died")

    with pytest.raises(RuntimeError):
        store.save_many(items())

    assert StateStore(tmp_path).load_all() == []
