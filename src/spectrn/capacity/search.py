"""The bracketing search for the highest load that passes, and how many requests a probe needs (pure).

One ``Bracket`` per variant. It asks for loads one at a time (``next_load``) and is told whether each passed
(``record``):

1. **doubling**: ``start``, then twice the highest passing load, until a probe fails or ``maximum`` passed;
2. **bisection** between the last pass and the first fail, until they are within the precision: for
   concurrency adjacent integers (``precision`` 1: no integer load lies between them; a larger integer
   ``precision`` stops earlier), for rates a relative width ``(fail - pass) / pass <= precision`` (10 %).

The capacity is the highest passing load. The search assumes a pass is monotone in load (a load below a
passing one passes): latency grows with the requests in flight. ``None`` when ``start`` already fails;
``reached_max`` when ``maximum`` passed (the capacity is at least that).

Requests per probe: a p-th percentile is judged on at least ``ceil(10 / (1 - p/100))`` requests, so that
at least ten requests lie at or above it (100 for p90, 1,000 for p99); p100 (the maximum) has no such count
and is held to p99.9's (10,000). A closed-loop probe also runs at least two requests per stream
(``2 x concurrency``), so the level is not all ramp and drain.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

LoadKind = Literal["concurrency", "rate"]
TAIL_REQUESTS = 10  # requests at or beyond the percentile a probe judges
MAX_RULE_PERCENTILE = 99.9  # p100 has no finite count: held to p99.9's
DEFAULT_RATE_PRECISION = 0.10


def requests_for_percentile(percentile: float) -> int:
    """``ceil(10 / (1 - p/100))``: 100 for p90, 20 for p50, 1,000 for p99 (p100: p99.9's 10,000)."""
    p = min(float(percentile), MAX_RULE_PERCENTILE)
    # 1000 / (100 - p) == 10 / (1 - p/100) with one rounding fewer (p90 gives exactly 100, not 101)
    return math.ceil(round(TAIL_REQUESTS * 100.0 / (100.0 - p), 6))


def requests_per_probe(
    percentiles: Iterable[float], *, minimum: int | None = None, kind: LoadKind = "concurrency", load: float = 1
) -> int:
    """The requests one probe runs per variant: the most any percentile SLO needs, ``minimum`` (``--requests``)
    if larger, and for a closed loop at least two per stream."""
    need = max((requests_for_percentile(p) for p in percentiles), default=TAIL_REQUESTS)
    if minimum is not None:
        need = max(need, minimum)
    if kind == "concurrency":
        need = max(need, 2 * int(load))
    return need


def precision_text(kind: LoadKind, precision: float) -> str:
    if kind == "concurrency":
        return "adjacent concurrencies" if precision <= 1 else f"within {precision:g} concurrent requests"
    return f"within {precision:.0%} of the capacity (relative)"


@dataclass
class Bracket:
    """The search state of one variant; ``history`` holds every (load, passed) it was told, in order."""

    kind: LoadKind
    start: float
    maximum: float
    precision: float
    last_pass: float | None = None
    first_fail: float | None = None
    history: list[tuple[float, bool]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.start <= self.maximum:
            raise ValueError(f"start {self.start:g} must be above 0 and at most the maximum {self.maximum:g}")
        if self.precision <= 0:
            raise ValueError(f"precision {self.precision:g} must be above 0")
        if self.kind == "concurrency" and (self.start != int(self.start) or self.maximum != int(self.maximum)):
            raise ValueError("a concurrency search runs on integers: start and maximum must be whole numbers")

    @property
    def doubling(self) -> bool:
        return self.first_fail is None

    @property
    def reached_max(self) -> bool:
        return self.last_pass is not None and self.last_pass >= self.maximum

    def within_precision(self) -> bool:
        if self.last_pass is None or self.first_fail is None:
            return False
        width = self.first_fail - self.last_pass
        if self.kind == "concurrency":
            return width <= max(1.0, math.floor(self.precision))
        return width / self.last_pass <= self.precision

    def next_load(self) -> float | None:
        """The next load to probe, or None when the search is over."""
        if self.first_fail is None:
            if self.last_pass is None:
                return self.start
            if self.last_pass >= self.maximum:
                return None
            return min(self.last_pass * 2, self.maximum)
        if self.last_pass is None or self.within_precision():
            return None
        mid = (self.last_pass + self.first_fail) / 2
        if self.kind == "concurrency":
            mid = float(math.floor(mid))
        return mid

    def record(self, load: float, passed: bool) -> None:
        """One probe's verdict. A pass above a known fail (or a fail below a known pass) breaks monotonicity:
        it is kept in ``history`` and the bracket keeps the tighter, consistent side."""
        self.history.append((load, passed))
        if passed:
            if (self.last_pass is None or load > self.last_pass) and (
                self.first_fail is None or load < self.first_fail
            ):
                self.last_pass = load
        elif (self.first_fail is None or load < self.first_fail) and (self.last_pass is None or load > self.last_pass):
            self.first_fail = load

    @property
    def capacity(self) -> float | None:
        return self.last_pass

    @property
    def monotone(self) -> bool:
        """Whether every verdict agrees with one threshold (no pass above a fail)."""
        fails = [x for x, ok in self.history if not ok]
        return not any(ok and fails and x > min(fails) for x, ok in self.history)
