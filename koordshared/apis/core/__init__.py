"""Kubernetes' core/v1 rules on pods and nodes as every process reads them: a pod's identity, owners,
requests and Kubernetes QoS class; a node's readiness, selection, affinity and taints."""
