"""The hub's HTTP surface: REST resources for qctl and the web UI, submissions, logs, and the
agents' WebSocket session endpoint. Handlers are thin: they authenticate, validate and call
the hub's state and dispatch layers."""
