"""Kubernetes' own machinery every API group uses (``apimachinery``): quantities, durations and
timestamps, label selectors, strict args decoding, where each resource lives, and cpu lists."""
