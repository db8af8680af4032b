"""The scheduling queue: activeQ, backoffQ and the unschedulable pods (see :mod:`.queue`)."""
