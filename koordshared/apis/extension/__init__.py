"""Koordinator's ``apis/extension``: the labels, annotations and classes it adds to pods and nodes (QoS
and priority classes, gangs, elastic quotas, device and NUMA requests, scheduling hints)."""
