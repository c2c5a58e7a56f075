"""The simulated kubelet: runs bound pods with the process or the simulated runtime."""
