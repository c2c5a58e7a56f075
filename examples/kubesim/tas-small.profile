# kubesim node profile (YAML). Named .profile, not .yaml: `qctl validate -f examples/` reads
# every .yaml file under examples/ as a Kubernetes manifest.
# A small fabric for topology-aware placement end to end (e2e/test_topology.py): 2 blocks of
# 2 racks of 2 hosts, 2 CPUs each — a rack holds 4 one-CPU pods, a block 8, the cluster 16.
nodes:
  - namePrefix: host
    count: 8
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
    topology:
      - {label: cloud.provider.com/topology-block, size: 4, prefix: block-}
      - {label: cloud.provider.com/topology-rack, size: 2, prefix: rack-}
