# kubesim node profile (YAML). Named .profile, not .yaml: `qctl validate -f examples/` reads
# every .yaml file under examples/ as a Kubernetes manifest.
# A 1,024-node GPU fabric for topology-aware placement at scale (bench.engine_topology):
# 16 blocks × 8 racks × 8 hosts, 8 GPUs a host. The labels are the levels of the Topology
# `gpu-fabric` and the node labels of the flavor `gpu-h100` in examples/flavors.yaml.
nodes:
  - namePrefix: gpu
    count: 1024
    capacity: {cpu: "96", memory: 1360Gi, pods: "110", nvidia.com/gpu: "8"}
    labels:
      multiq.dev/pool: gpu
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
    taints:
      - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
    topology:
      - {label: cloud.provider.com/topology-block, size: 64, prefix: block-}
      - {label: cloud.provider.com/topology-rack, size: 8, prefix: rack-}
