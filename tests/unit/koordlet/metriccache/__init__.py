"""Unit tests of koordlet.metriccache."""
