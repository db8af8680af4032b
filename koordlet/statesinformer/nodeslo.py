"""NodeSLO: keep the last good one in force (statesinformer layer).

The spec is merged over Koordinator's defaults and validated by :mod:`koordshared.apis.slo.nodeslo` (the
manager renders with the same code). A refused spec leaves the previous NodeSLO in force and is reported
(log, counter, Node Event) by :class:`NodeSLOStore`.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from koordlet import api
from koordshared.apis.slo.nodeslo import InvalidNodeSLO, build

log = logging.getLogger(__name__)

InvalidHook = Callable[[str], None]


class NodeSLOStore:
    """The NodeSLO in force. :meth:`apply` takes a raw spec; invalid ones are refused and reported."""

    def __init__(
        self,
        *,
        on_change: Callable[[], None] | None = None,
        on_invalid: InvalidHook | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._current = build(None)
        self._raw: Any = None
        self._refused: Any = None
        self._seen = False
        self._on_change = on_change
        self._on_invalid = on_invalid

    def current(self) -> api.NodeSLO:
        with self._lock:
            return self._current

    @property
    def seen(self) -> bool:
        """Whether a spec (or the decision that there is none) has been applied at least once."""
        with self._lock:
            return self._seen

    def apply(self, spec: Any) -> bool:
        """Make ``spec`` (``None`` = no NodeSLO: defaults) current if valid; True when it took effect or
        was already in force, False when refused (the previous NodeSLO stays). The same refused spec
        seen again (a re-list) is not reported again, so a bad object does not spam Events."""
        with self._lock:
            if self._refused is not None and spec == self._refused:
                return False
        try:
            candidate = build(spec)
        except InvalidNodeSLO as err:
            log.warning("NodeSLO refused, keeping generation %d: %s", self.current().generation, str(err))
            with self._lock:
                self._seen = True
                self._refused = copy.deepcopy(spec)
            if self._on_invalid is not None:
                self._on_invalid(str(err))
            return False
        with self._lock:
            self._seen = True
            self._refused = None
            if spec == self._raw:
                return True
            current = self._current
            # the generation alone differs between a rebuilt spec and the one in force
            same = dataclasses.replace(candidate, generation=current.generation) == current
            self._raw = copy.deepcopy(spec)
            if same:
                return True
            self._current = dataclasses.replace(candidate, generation=current.generation + 1)
            generation = self._current.generation
        log.info("NodeSLO generation %d in force", generation)
        if self._on_change is not None:
            self._on_change()
        return True
