"""Koordinator's CR schema types, quantities and config shapes: one home for the agent and the cluster side.

Pure: the standard library, :mod:`koordlet.errors` and :mod:`koordlet.api` only (no ``kubernetes``), so the
agent, the manager, the scheduler extender and the descheduler parse NodeMetric, NodeSLO and the
``slo-controller-config`` ConfigMap with the same code.
"""
