"""kubesim: wire-faithful local Kubernetes clusters for development, demos, tests and scale.

Public entry points: `kubesim.testing.running` (in-process clusters for tests),
`kubesim.cli` (`kubesim up`), `kubesim.cluster.Cluster` / `ClusterConfig` (one cluster and its
admin hooks), `kubesim.profile` (node profiles). See kubesim/README.md. Product code (hub,
agent, qctl) never imports this package: it talks to kubesim over HTTP only.
"""
