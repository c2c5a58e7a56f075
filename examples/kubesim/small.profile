# A small general-purpose cluster: 4 CPU nodes. `kubesim up --profile examples/kubesim/small.yaml`
nodes:
  - namePrefix: node
    count: 4
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    labels:
      node.kubernetes.io/instance-type: e2-standard-8
      topology.kubernetes.io/zone: zone-a
