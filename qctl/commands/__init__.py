"""One module per qctl verb; each exposes `register(subparsers)` and a `run(args)` function."""
