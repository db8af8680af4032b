"""The scheduler cache: nodes and pods from the informers, assumed pods, snapshots (see :mod:`.cache`)."""
