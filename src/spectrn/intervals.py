"""The one spelling of a figure with its interval: ``2.99x [2.96, 3.11]``, ``52.1 [49.8, 54.0]`` (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# an interval whose bounds print alike is no interval a reader can use: it says why instead
NO_SPREAD = "no spread: every resample gave this value (one sample or one repeat, or samples all alike)"


def interval_text(
    ci: Sequence[float] | None, digits: int = 2, *, scale: float = 1.0, prefix: str = "", lead: str = " "
) -> str:
    """``[lo, hi]`` of ``ci`` times ``scale`` with ``digits`` decimals, ``prefix`` before each bound (``$``); ``lead``
    goes before the bracket. Empty for no interval; a non-finite bound is ``n/a``; bounds that print alike read
    ``(no spread: ...)`` rather than a zero-width interval shown as if precise."""
    if ci is None:
        return ""
    lo, hi = (_bound(x * scale, digits, prefix) for x in (ci[0], ci[1]))
    return f"{lead}({NO_SPREAD})" if lo == hi else f"{lead}[{lo}, {hi}]"


def _bound(x: float, digits: int, prefix: str) -> str:
    return f"{prefix}{x:.{digits}f}" if math.isfinite(x) else "n/a"


def with_interval(
    value: float | None, ci: Sequence[float] | None, digits: int = 2, *, scale: float = 1.0, suffix: str = ""
) -> str:
    """``value<suffix> [lo, hi]``: a figure and its interval (``n/a`` without a value; no bracket without a ci)."""
    if value is None:
        return "n/a"
    return f"{value * scale:.{digits}f}{suffix}" + interval_text(ci, digits, scale=scale)
