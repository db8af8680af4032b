"""koord-manager: Koordinator's slo-controller (NodeMetric, NodeSLO and batch-resource controllers).

Runs in the cluster as a Deployment of two replicas with leader election; builds on the shared cluster
layer (:mod:`koordshared.kube`) and the shared schema (:mod:`koordshared.apis`), never on the node side.
"""
