"""Tests of the built-in QoS plugins on koordlet.testing's harness."""
