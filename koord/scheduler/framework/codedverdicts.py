"""A batch Filter answer as codes (:class:`CodedVerdicts`): one small integer per node and the Status each
code stands for. A plugin whose verdicts come out of array maths (LoadAware: pass, expired, cpu over,
memory over...) answers thousands of nodes without building a list of thousands of references, and the
cycle finds each code's nodes with one comparison instead of telling the statuses apart node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np

from koord.scheduler.framework.interface import Status


@dataclass(frozen=True, slots=True)
class CodedVerdicts(Sequence[Status | None]):
    """Reads as the sequence of statuses it encodes (``verdicts[i]`` is node ``i``'s)."""

    codes: np.ndarray
    """One integer per node, in order: an index into :attr:`statuses`."""
    statuses: Sequence[Status | None]
    """What each code means (None or a success: the node passes)."""

    def __len__(self) -> int:
        return len(self.codes)

    @overload
    def __getitem__(self, i: int) -> Status | None: ...

    @overload
    def __getitem__(self, i: slice) -> list[Status | None]: ...

    def __getitem__(self, i: int | slice) -> Status | list[Status | None] | None:
        if isinstance(i, slice):
            return [self.statuses[c] for c in self.codes[i].tolist()]
        return self.statuses[int(self.codes[i])]
