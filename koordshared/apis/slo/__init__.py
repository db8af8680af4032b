"""``slo.koordinator.sh/v1alpha1``: the NodeSLO (typed, defaulted, merged, validated) and the NodeMetric."""
