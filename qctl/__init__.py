"""qctl: the MultiQ command line, also installed as the kubectl plugin `kubectl-qctl`."""
