"""Koordinator's API types (its ``apis/``): one home for the agent and the cluster side.

The pod vocabulary (``extension``: QoS and priority classes), the typed NodeSLO (``slo``), CR schema types,
quantities, selectors, cpu lists and config shapes. Pure: the standard library and
:mod:`koordshared.runtime.errors` only (no ``kubernetes``), so the agent, the manager, the scheduler and the
descheduler parse NodeMetric, NodeSLO and the ``slo-controller-config`` ConfigMap with the same code.
"""
