"""A prompt class's share of a mixed load level: its delivered tokens over the level's wall, its billed time.

A mixed level runs every class on one server at once, so a class has no wall time of its own. Two shares of the
level are defined instead (docs/benchmarks.md, "Per-class throughput and cost", with a worked example):

- **throughput**: the class's output tokens over the level's wall W (first send to last end, all classes):
  X_c = T_c / W. The classes sum to the pooled figure and none exceeds it, whatever the queue does.
- **billed time and cost**: the instance's W seconds are split among classes by the slot-seconds their requests
  held a decode slot, the span from first to last token of each request (D_c of D in all): B_c = W x D_c / D,
  and $/M of the class = price x B_c / T_c. The classes' bills sum to the level's bill, so the pooled $/M lies
  between the classes' own. Time waiting in the queue is not billed to a class (a queued request holds no
  slot); neither is prefill, which the client cannot tell apart from the queue.

The old per-class wall, sum(e2e_c) / streams, counted queueing as if every stream drained at the same pace:
above the batch limit each class then "delivered" more than all requests together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LevelShare:
    """What a class's figures are shares of: the level's wall W and its decode slot-seconds D (real seconds)."""

    wall_s: float
    slot_s: float

    def billed_s(self, class_slot_s: float) -> float:
        """B_c = W x D_c / D: the class's part of the instance's time (0 when nothing held a slot)."""
        return self.wall_s * class_slot_s / self.slot_s if self.slot_s > 0 else 0.0


def decode_spans(ttft: Any, e2e: Any) -> Any:
    """Each request's slot time as a client sees it: first token to last token (e2e - TTFT, never negative)."""
    import numpy as np

    return np.clip(np.asarray(e2e, dtype=float) - np.asarray(ttft, dtype=float), 0.0, None)


def level_share(ttft: Any, e2e: Any, wall_s: float) -> LevelShare:
    """The share basis of one variant at one level, from all its completed requests (all classes)."""
    import numpy as np

    return LevelShare(wall_s=wall_s, slot_s=float(np.nansum(decode_spans(ttft, e2e))))
