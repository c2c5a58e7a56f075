"""Models of the upstream Kubernetes objects MultiQ reads: core pod-spec pieces (taints,
tolerations, selectors, pod templates), batch/v1 Job and jobset.x-k8s.io JobSet."""
