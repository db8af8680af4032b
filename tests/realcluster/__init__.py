"""A real Kubernetes on this machine (built from its Go modules) with our stack on it: the ground truth
the real-cluster test tier checks every cluster-side behaviour against (``make cluster``)."""
