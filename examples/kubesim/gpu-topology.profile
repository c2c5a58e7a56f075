# kubesim node profile (YAML). Named .profile, not .yaml: `qctl validate -f examples/` reads
# every .yaml file under examples/ as a Kubernetes manifest.
# A GPU cluster with a block / rack topology (for topology-aware placement) and a CPU pool.
# GPU nodes are tainted, as on real GPU node pools: GPU pods need the toleration.
nodes:
  - namePrefix: gpu
    count: 16
    capacity: {cpu: "96", memory: 1360Gi, pods: "110", nvidia.com/gpu: "8"}
    labels:
      node.kubernetes.io/instance-type: a3-highgpu-8g
      cloud.google.com/gke-accelerator: nvidia-h100-80gb
    taints:
      - {key: nvidia.com/gpu, value: present, effect: NoSchedule}
    topology:
      - {label: cloud.google.com/gce-topology-block, size: 8, prefix: block-}
      - {label: cloud.google.com/gce-topology-subblock, size: 4, prefix: subblock-}
  - namePrefix: cpu
    count: 4
    capacity: {cpu: "32", memory: 128Gi, pods: "110"}
    labels:
      node.kubernetes.io/instance-type: n2-standard-32
