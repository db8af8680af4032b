"""Koordinator's API types (its ``apis/``), one home for the agent and the cluster side, grouped by API
group: ``meta`` (apimachinery), ``core`` (core/v1), ``scheduling``, ``extension``, ``slo``,
``configuration`` and ``topology``; a group imports only the groups below it (``.importlinter``'s
``apis-layers``). Pure: the standard library and :mod:`koordshared.runtime.errors` only (no
``kubernetes``), so every process parses NodeMetric, NodeSLO and the ``slo-controller-config`` ConfigMap
with the same code.
"""
