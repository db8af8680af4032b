"""Tests of koordlet.resourceexecutor: validation, caching, leveled writes, audit."""
