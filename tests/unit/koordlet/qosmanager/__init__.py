"""Tests of koordlet.qosmanager: the evictor."""
