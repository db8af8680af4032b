"""States informer: node, pods, NodeSLO and NodeMetric reporting; the only user of the API client.

Public entry points: :class:`StatesInformer` (implements ``koordlet.api.StatesReader``) built from an
:class:`InformerConfig`. The API client is the lean one of :mod:`koordshared.kube.client` (the
``kubernetes`` package only where the credentials need it), made when cluster mode starts.
"""

from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.informer import StatesInformer

__all__ = ["InformerConfig", "StatesInformer"]
