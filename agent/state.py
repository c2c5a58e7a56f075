"""What the agent remembers across restarts, in `--state-dir`: the last ConfigSync from the
hub, and every workload it holds (the offer with the admission recorded in the workload's
status, the phase, how many Jobs it made).

Writes are atomic (temp file + rename), one small file per workload, so a crash mid-write
leaves the previous version. Synchronous on purpose: files are small and written only on
transitions.

Called by: agent.admission (save/forget held workloads, config), agent.app (load at start).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from api.v1alpha1.messages import ConfigSync, DispatchOffer, WorkloadPhase

__all__ = ["Held", "StateStore"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Held:
    """A workload this cluster holds (pending, admitted, running or finished)."""

    offer: DispatchOffer
    phase: WorkloadPhase = WorkloadPhase.PENDING
    offered_at: float = 0.0
    job_names: list[str] = field(default_factory=list)
    """The Jobs materialisation made (empty until admitted)."""

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

    def to_json(self) -> str:
        return json.dumps(
            {
                "offer": self.offer.model_dump(mode="json", by_alias=True, exclude_none=True),
                "phase": self.phase.value,
                "offeredAt": self.offered_at,
                "jobNames": self.job_names,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Held:
        data = json.loads(text)
        return cls(
            offer=DispatchOffer.model_validate(data["offer"]),
            phase=WorkloadPhase(data["phase"]),
            offered_at=float(data.get("offeredAt", 0.0)),
            job_names=list(data.get("jobNames") or []),
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

    def _file(self, key: str) -> Path:
        return self._workloads / (key.replace("/", "__") + ".json")

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

    def save(self, held: Held) -> None:
        _write_atomic(self._file(held.key), held.to_json())

    def forget(self, key: str) -> None:
        self._file(key).unlink(missing_ok=True)

    def load_all(self) -> list[Held]:
        out = []
        for path in sorted(self._workloads.glob("*.json")):
            try:
                out.append(Held.from_json(path.read_text()))
            except (ValueError, KeyError, ValidationError, OSError) as exc:
                log.error("ignoring unreadable %s: %s", path, exc)
        return out
