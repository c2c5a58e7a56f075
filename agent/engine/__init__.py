"""Pure admission engine: a frozen cluster snapshot and `now` in, admission decisions out.

Entry point: `cycle.schedule(snapshot, now) -> CycleResult`. Inputs are the frozen types of
`snapshot` (built by the agent's inventory, by `from_api.build_snapshot`, or by the tests'
builders); outputs are the data of `result` (admissions, preemptions, evictions, a pending
reason and queue position for every other workload, the next time-based wakeup).
`apply.apply_result` shows what each decision means by applying it to a snapshot.

Modules, leaves first: snapshot (input types) → quota (cohort tree arithmetic) → result
(output types) → topology (where a pod set's pods go in a flavor's block/rack/host domains)
→ flavors (flavor assignment) → preemption (classic victim search) → gang (partial
admission) → ordering, podsready (evictions, backoff) → carry (what the incremental cycle
keeps) → cycle (the admission cycle) → apply, from_api. No module here does I/O, reads a
clock or draws random numbers; the import-linter contract "pure cores do no I/O and read no
clock" enforces it.
"""
