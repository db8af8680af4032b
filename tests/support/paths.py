"""The repository's root, for tests that read files of the tree (deploy manifests, docs, fixtures)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
