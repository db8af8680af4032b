"""Tests of the C helpers and their pure-Python fallback."""
