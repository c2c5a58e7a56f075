"""The call meter `bench.federation_meter` puts into the processes it starts: on PYTHONPATH, this
module is imported at every interpreter's start-up (Python's `site` hook) and, when
MULTIQ_METER names functions (`module:Qualified.name`, comma-separated), wraps each as its
module is first imported, so the names other modules import from it are the wrapped ones too.
A wrapped call adds the CPU time of the calling thread (`time.thread_time`) spent inside it to
its function's total, with the count of calls.

The name `gc` meters the cyclic garbage collector instead: each collection of generation N
adds its CPU time (the collecting thread's, from the collector's start callback to its stop)
to `gc:generationN`, with the count of collections. A collection runs inside whatever
allocation set it off, so a function metered around it counts its time too.

SIGUSR2 resets the totals; SIGUSR1 writes them to MULTIQ_METER_DIR/<pid>.json (written whole,
then renamed into place) as {"argv0": ..., "totals": {name: [calls, cpu_seconds]}}. With
MULTIQ_METER_AT_EXIT=1 a process also writes them when it exits normally or is sent SIGTERM
(unless it handles SIGTERM itself, and then exits normally): how a bench that does not send
the signals is metered, such as the floor's (`bench.control_plane_floor`, whose hub and
agents keep the totals of everything they ran).

Only plain functions and methods can be metered: the CPU of a coroutine is spent in pieces
between awaits, which a wrapper around the call does not see (the driver refuses them first).
A metered function called inside another metered one is counted in both.

Used by: bench.federation_meter (the only code to set MULTIQ_METER), and by hand for other
benches' processes (README, session 44: the floor's). Not product code.
"""

from __future__ import annotations

import atexit
import functools
import gc
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import FrameType, ModuleType
from typing import Any

_TOTALS: dict[str, list[float]] = {}
"""Per metered function: [calls, CPU seconds]."""


def _targets(spec: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        module, _, attr = item.partition(":")
        out.setdefault(module, []).append(attr)
    return out


def _wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    totals = _TOTALS.setdefault(name, [0, 0.0])
    clock = time.thread_time

    @functools.wraps(fn)
    def metered(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[0] += 1
            totals[1] += clock() - started

    return metered


GC_TARGET = "gc"
"""The meter name that stands for the garbage collector, not a function."""


def _meter_collector() -> None:
    clock = time.thread_time
    totals = [_TOTALS.setdefault(f"gc:generation{g}", [0, 0.0]) for g in range(3)]
    started = [0.0]

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = clock()
            return
        generation = totals[info["generation"]]
        generation[0] += 1
        generation[1] += clock() - started[0]

    gc.callbacks.append(on_collection)


def _patch(module: ModuleType, attrs: Sequence[str]) -> None:
    for attr in attrs:
        *path, last = attr.split(".")
        owner: Any = module
        for part in path:
            owner = getattr(owner, part)
        name = f"{module.__name__}:{attr}"
        # A class's static and class methods are wrapped inside their descriptor: the plain
        # function set in their place would be bound as a method and take one more argument.
        raw = vars(owner).get(last) if isinstance(owner, type) else None
        if isinstance(raw, staticmethod | classmethod):
            setattr(owner, last, type(raw)(_wrap(name, raw.__func__)))
        else:
            setattr(owner, last, _wrap(name, getattr(owner, last)))


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, targets: dict[str, list[str]]) -> None:
        self.targets = targets

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in self.targets:
            return None
        sys.meta_path.remove(self)  # find it as it would be found without us
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module
        attrs = self.targets[name]

        def exec_module(module: ModuleType) -> None:
            execute(module)
            _patch(module, attrs)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _dump(signum: int, frame: FrameType | None) -> None:
    folder = os.environ["MULTIQ_METER_DIR"]
    final = os.path.join(folder, f"{os.getpid()}.json")
    with open(final + ".tmp", "w") as out:
        json.dump({"argv0": os.path.basename(sys.argv[0]), "totals": _TOTALS}, out)
    os.replace(final + ".tmp", final)


def _dump_and_terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM's default action, the totals written first."""
    _dump(signum, frame)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _reset(signum: int, frame: FrameType | None) -> None:
    for totals in _TOTALS.values():
        totals[0], totals[1] = 0, 0.0


if os.environ.get("MULTIQ_METER") and os.environ.get("MULTIQ_METER_DIR"):
    _items = [part.strip() for part in os.environ["MULTIQ_METER"].split(",")]
    if GC_TARGET in _items:
        _meter_collector()
    _waiting = _targets(",".join(item for item in _items if item != GC_TARGET))
    for _name in [n for n in _waiting if n in sys.modules]:
        # Imported before this hook (by `site`, or by this module: json, os, …): wrapped now;
        # modules that took its names already keep the unwrapped ones.
        _patch(sys.modules[_name], _waiting.pop(_name))
    sys.meta_path.insert(0, _PatchOnImport(_waiting))
    signal.signal(signal.SIGUSR1, _dump)
    signal.signal(signal.SIGUSR2, _reset)
    if os.environ.get("MULTIQ_METER_AT_EXIT") == "1":
        atexit.register(_dump, signal.SIGUSR1, None)
        signal.signal(signal.SIGTERM, _dump_and_terminate)
