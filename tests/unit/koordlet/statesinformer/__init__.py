"""Tests of koordlet.statesinformer: pods, node, NodeSLO, NodeMetric, PLEG."""
