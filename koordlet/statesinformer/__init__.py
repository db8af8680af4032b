"""States informer: node, pods, NodeSLO and NodeMetric reporting; the only user of the API client.

Public entry points: :class:`StatesInformer` (implements ``koordlet.api.StatesReader``) built from an
:class:`InformerConfig`. The ``kubernetes`` client is imported only when cluster mode starts.
"""

from koordlet.statesinformer.config import InformerConfig
from koordlet.statesinformer.informer import StatesInformer

__all__ = ["InformerConfig", "StatesInformer"]
