"""Reusable cluster-side test machinery, independent of pytest fixtures: object builders, a stand-in for
kube-scheduler driving HTTP extenders, and a fake NodeMetric reporter."""
