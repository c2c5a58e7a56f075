"""What the agent remembers across restarts, in `--state-dir`: the last ConfigSync from the
hub, and every workload it holds.

Each held workload is two files under `workloads/`: `<ns>__<name>.offer.json`, the offer as
received (written once — it carries the pod templates and the source, the bulk), and
`<ns>__<name>.json`, what changes (generation, phase, the workload's status with its
admission, the Jobs made). Writes are atomic (temp file + rename), so a crash mid-write leaves
the previous version. `save_many` is blocking and meant for a worker thread (the admission
loop batches one write per workload per pass and hands them to `asyncio.to_thread`).

Persisted transitions: offered, materialised (admission and Job names), finished, forgotten.
Running is not persisted: it is re-observed from the cluster after a restart.

Called by: agent.admission (save/forget held workloads, config), agent.app (load at start).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from api.v1alpha1.messages import ConfigSync, DispatchOffer, WorkloadPhase
from api.v1alpha1.workload import WorkloadStatus

__all__ = ["Held", "StateStore"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A workload this cluster holds (pending, admitted, running or finished)."""

    offer: DispatchOffer
    phase: WorkloadPhase = WorkloadPhase.PENDING
    offered_at: float = 0.0
    job_names: list[str] = field(default_factory=list)
    """The Jobs materialisation made (empty until they all exist)."""

    @property
    def key(self) -> str:
        meta = self.offer.workload.metadata
        return f"{meta.namespace or 'default'}/{meta.name}"

    @property
    def generation(self) -> int:
        return self.offer.generation

    @property
    def finished(self) -> bool:
        return self.phase in (WorkloadPhase.SUCCEEDED, WorkloadPhase.FAILED)

    def offer_json(self) -> str:
        """The offer as received (without the status the agent adds)."""
        bare = self.offer.model_copy(
            update={"workload": self.offer.workload.model_copy(update={"status": None})}
        )
        return bare.model_dump_json(by_alias=True, exclude_none=True)

    def state_json(self) -> str:
        status = self.offer.workload.status
        return json.dumps(
            {
                "generation": self.generation,
                "phase": self.phase.value,
                "offeredAt": self.offered_at,
                "jobNames": self.job_names,
                "status": None
                if status is None
                else status.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        )

    @classmethod
    def from_json(cls, offer_text: str, state_text: str) -> Held:
        offer = DispatchOffer.model_validate_json(offer_text)
        state = json.loads(state_text)
        if state.get("generation") != offer.generation:
            raise ValueError("state and offer disagree on the generation")
        if state.get("status") is not None:
            offer.workload.status = WorkloadStatus.model_validate(state["status"])
        return cls(
            offer=offer,
            phase=WorkloadPhase(state["phase"]),
            offered_at=float(state.get("offeredAt", 0.0)),
            job_names=list(state.get("jobNames") or []),
        )


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class StateStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._workloads = directory / "workloads"
        self._workloads.mkdir(parents=True, exist_ok=True)

    def _stem(self, key: str) -> Path:
        return self._workloads / key.replace("/", "__")

    def save_config(self, config: ConfigSync) -> None:
        _write_atomic(self.directory / "config.json", config.model_dump_json(by_alias=True))

    def load_config(self) -> ConfigSync | None:
        path = self.directory / "config.json"
        if not path.exists():
            return None
        try:
            return ConfigSync.model_validate_json(path.read_text())
        except (ValidationError, OSError) as exc:
            log.error("ignoring unreadable %s: %s", path, exc)
            return None

    def save(self, held: Held, *, with_offer: bool = True) -> None:
        self.save_many([(held.key, held.offer_json() if with_offer else None, held.state_json())])

    def save_many(self, items: Iterable[tuple[str, str | None, str]]) -> None:
        """Write (key, offer JSON or None to keep the file, state JSON) for each workload."""
        for key, offer_text, state_text in items:
            stem = self._stem(key)
            if offer_text is not None:
                _write_atomic(stem.with_suffix(".offer.json"), offer_text)
            _write_atomic(stem.with_suffix(".json"), state_text)

    def forget(self, key: str) -> None:
        stem = self._stem(key)
        stem.with_suffix(".json").unlink(missing_ok=True)
        stem.with_suffix(".offer.json").unlink(missing_ok=True)

    def load_all(self) -> list[Held]:
        out = []
        for offer_path in sorted(self._workloads.glob("*.offer.json")):
            state_path = offer_path.with_name(offer_path.name.removesuffix(".offer.json") + ".json")
            try:
                out.append(Held.from_json(offer_path.read_text(), state_path.read_text()))
            except (ValueError, KeyError, ValidationError, OSError) as exc:
                log.error("ignoring unreadable %s: %s", offer_path, exc)
        return out
