# kubesim node profile (YAML). Named .profile, not .yaml: `qctl validate -f examples/` reads
# every .yaml file under examples/ as a Kubernetes manifest.
# A small general-purpose cluster: 4 CPU nodes. `kubesim up --profile examples/kubesim/small.profile`
nodes:
  - namePrefix: node
    count: 4
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    labels:
      node.kubernetes.io/instance-type: e2-standard-8
      topology.kubernetes.io/zone: zone-a
