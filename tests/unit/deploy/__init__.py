"""Tests of deploy/: manifests, RBAC, capabilities, Dockerfile and wheel."""
