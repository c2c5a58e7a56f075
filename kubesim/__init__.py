"""kubesim: wire-faithful local Kubernetes clusters for development, demos, tests and scale."""
