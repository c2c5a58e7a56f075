"""When the admission loop runs its next pass: the pause after a pass, when the next
admission cycle is due on time alone (the engine's own wake-up, or the next sample of the
local queues' usage under admission fair sharing), and whether a cycle runs in the loop or
in a worker thread. Pure: times in, times out.

Called by: agent.admission (`AdmissionShell.run` and `cycle`).
"""

from __future__ import annotations

__all__ = [
    "LIGHT_CYCLE_CPU_SECONDS",
    "next_cycle_wakeup",
    "pause_after_pass",
    "runs_in_loop",
    "wait_timeout",
]

LIGHT_CYCLE_CPU_SECONDS = 0.001
"""A cycle handed to a worker thread costs the loop about 0.1 ms of CPU for the hand-over
alone (waking the thread, the GIL passing back and forth, the loop woken with the result):
as much as a whole incremental cycle over a few new offers."""


def runs_in_loop(last_cycle_cpu: float, small: bool) -> bool:
    """Whether the next cycle runs in the event loop: a small one (agent.snapshots
    `next_cycle_is_small`) after a cycle that took less CPU than LIGHT_CYCLE_CPU_SECONDS.
    Anything bigger (a rebuild, a burst of offers, a deep queue) goes to a worker thread: in
    the loop it would hold up every Job create, watch event and hub message meanwhile."""
    return small and last_cycle_cpu < LIGHT_CYCLE_CPU_SECONDS


def pause_after_pass(started: float, finished: float, min_interval: float) -> float:
    """How long the loop waits after a pass before it may start the next: passes start at
    most every `min_interval` (events meanwhile are coalesced into one pass), counted from
    the start of a pass, so a pass that took longer is followed at once. Counting from its
    end would leave quota released during a long pass idle for one more interval."""
    return max(0.0, started + min_interval - finished)


def next_cycle_wakeup(engine_wakeup: float | None, usage_sample_at: float | None) -> float | None:
    """When a cycle is due although nothing happened: the engine's next time-based decision
    (backoffs, timeouts) or the next sample of the local queues' usage, whichever is first
    (a sample changes the queues' order; None: neither)."""
    times = [t for t in (engine_wakeup, usage_sample_at) if t is not None]
    return min(times) if times else None


def wait_timeout(wakeups: tuple[float | None, ...], now: float) -> float | None:
    """How long the loop may wait for an event: until the first of its wake-ups (never
    negative: one already due is due at once), or for ever (None) without any."""
    times = [t for t in wakeups if t is not None]
    return max(0.0, min(times) - now) if times else None
