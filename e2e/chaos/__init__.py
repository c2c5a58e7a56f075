"""The chaos suite: a federation run under injected faults, and a checker that counts what
MultiQ promised and did not keep (issue #15).

`driver` runs it (`run_chaos`), `invariants` judges it, `faults` and `workloads` plan what
happens, `proxy` cuts and black-holes each agent's connections to the hubs, `federation`
starts the processes (two hubs on a local etcd, or one on SQLite) and kills etcd and hubs
for the HA faults (`HaControl`). Called by e2e/test_chaos.py (the bounded run) and
bench/chaos.py (the long one).
"""
