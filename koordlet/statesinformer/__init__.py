"""States informer: node, pods, NodeSLO and NodeMetric reporting; the only user of the API client."""
