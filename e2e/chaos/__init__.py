"""The chaos suite: a federation run under injected faults, and a checker that counts what
MultiQ promised and did not keep (issue #15). `driver` runs it, `invariants` judges it,
`proxy` cuts and black-holes hub↔agent traffic, `federation` starts the processes."""
