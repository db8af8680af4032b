"""koord-manager's admission webhooks (Koordinator's ``pkg/webhook``): its own certificates kept in a
Secret, the caBundle patched into its webhook configurations, the ClusterColocationProfile mutation of
pods, and the validation of pods, the ``slo-controller-config`` ConfigMap and ElasticQuota trees."""
