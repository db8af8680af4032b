"""``scheduling.koordinator.sh/v1alpha1``: the Reservation (with its reserve pod) and the Device."""
