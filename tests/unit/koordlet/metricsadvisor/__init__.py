"""Tests of koordlet.metricsadvisor: the collectors and the exporter."""
