# kubesim node profile (YAML). Named .profile, not .yaml: `qctl validate -f examples/` reads
# every .yaml file under examples/ as a Kubernetes manifest.
# Scale runs: many identical nodes (use --nodes to set the count, e.g. 5000).
nodes:
  - namePrefix: sim
    count: 1000
    capacity: {cpu: "32", memory: 128Gi, pods: "110"}
    labels:
      type: kwok
    topology:
      - {label: example.com/rack, size: 40, prefix: rack-}
