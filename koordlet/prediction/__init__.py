"""Peak prediction (Koordinator's ``pkg/koordlet/prediction``): decaying histograms of usage, trained from
the metric cache, and the prod-reclaimable predictors behind NodeMetric's ``prodReclaimableMetric``."""
