"""One module per group of qctl verbs, each holding the `run(args, out) -> int` functions
that qctl.cli names; a module is imported only when one of its verbs is chosen."""
