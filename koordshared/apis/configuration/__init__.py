"""Koordinator's ``apis/configuration``: the keys of ``slo-controller-config`` (colocation and NodeSLO
strategies)."""
