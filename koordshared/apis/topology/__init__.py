"""``topology.node.k8s.io/v1alpha1``: the NodeResourceTopology with Koordinator's annotations on it."""
