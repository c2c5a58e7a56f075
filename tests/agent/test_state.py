"""The agent's memory across restarts: held workloads in SQLite, the config in a file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.lease import LeaseTerms
from agent.records import Record, on_offer
from agent.state import SMALL_WRITE_BYTES, SMALL_WRITE_ROWS, StateStore, writes_in_loop
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


# --- how writes reach the disk --------------------------------------------------------------


def _row(i: int, size: int) -> tuple[str, str, str]:
    return f"team/w{i}", "o" * size, "s" * 100


def test_a_few_small_rows_are_written_in_the_loop_many_or_big_ones_in_a_thread() -> None:
    assert writes_in_loop(1, 6_000)
    assert writes_in_loop(SMALL_WRITE_ROWS, SMALL_WRITE_BYTES)
    assert not writes_in_loop(SMALL_WRITE_ROWS + 1, 100)
    assert not writes_in_loop(1, SMALL_WRITE_BYTES + 1)


def test_sqlite_never_checkpoints_the_log_inside_a_commit(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    for i in range(700):  # about 5.6 MB, past SQLite's own 1,000-page threshold
        store.save_many([_row(i, 8_000)])

    # Left to itself SQLite would have written the log back and started it over at about
    # 4 MB; here it only grows, and the database file holds nothing of the rows yet.
    assert (tmp_path / "held.db-wal").stat().st_size > 5_000_000
    assert (tmp_path / "held.db").stat().st_size < 100_000
    assert store.checkpoint_due()


def test_a_checkpoint_writes_the_log_back_and_is_due_again_only_after_as_many_pages(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path, checkpoint_pages=30)
    for i in range(9):  # 3 pages each: its text's full pages, and 2 for the row and its index
        store.save_many([_row(i, 8_000)])
    assert not store.checkpoint_due()
    store.save_many([_row(9, 8_000)])
    assert store.checkpoint_due()

    store.checkpoint()

    assert not store.checkpoint_due()
    assert (tmp_path / "held.db").stat().st_size > 80_000  # the rows are in the file now
    store.close()
    assert len(StateStore(tmp_path).load_all(lambda offer, state: offer)) == 10


def _threads_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions `asyncio.to_thread` is given (run in place here)."""
    seen: list[str] = []

    async def to_thread(fn: Callable[..., object], /, *args: object) -> object:
        seen.append(fn.__name__)
        return fn(*args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    return seen


async def test_a_small_write_stays_in_the_loop_and_a_big_one_goes_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(tmp_path)
    seen = _threads_seen(monkeypatch)

    await store.write([_row(i, 1_200) for i in range(7)], ["team/gone"])  # a pass's few
    assert seen == []
    await store.write([_row(i, 1_200) for i in range(7, 7 + SMALL_WRITE_ROWS + 1)], [])
    assert seen == ["save_many"]

    assert len(store.load_all(lambda offer, state: offer)) == 7 + SMALL_WRITE_ROWS + 1


async def test_a_write_that_makes_a_checkpoint_due_runs_it_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = StateStore(tmp_path, checkpoint_pages=6)  # two rows of 3 pages
    seen = _threads_seen(monkeypatch)

    await store.write([_row(1, 5_000)], [])
    assert seen == []
    await store.write([_row(2, 5_000)], [])

    assert seen == ["checkpoint"] and not store.checkpoint_due()
