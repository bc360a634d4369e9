"""Shared formatting of summary values: numbers, intervals, speedups, load levels, colours."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass


VARIANT_COLORS = {"baseline": "#1f77b4", "speculative": "#ff7f0e"}


OTHER_COLORS = ["#2ca02c", "#d62728", "#9467bd", "#8c564b"]


# (summary key, label, scale, unit) for latency metrics; scale turns seconds into the shown unit.
LATENCIES = [
    ("ttft_s", "TTFT", 1000.0, "ms"),
    ("tpot_s", "TPOT", 1000.0, "ms"),
    ("itl_s", "per-token ITL", 1000.0, "ms"),
    ("e2e_s", "e2e latency", 1.0, "s"),
]


SPEEDUPS = [
    ("tpot_p50", "TPOT p50"),
    ("itl_p50", "ITL p50"),
    ("e2e_p50", "e2e p50"),
    ("ttft_p50", "TTFT p50"),
    ("throughput", "throughput"),
]


def _color(variant: str, i: int = 0) -> str:
    return VARIANT_COLORS.get(variant, OTHER_COLORS[i % len(OTHER_COLORS)])


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def _ci(stats: Any, which: str = "p50") -> tuple[float, float] | None:
    ci = _get(stats, "ci95", which)
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(_num(c) is not None for c in ci):
        return float(ci[0]), float(ci[1])
    return None


def _speedup(sp: Any) -> tuple[float | None, tuple[float, float] | None]:
    if not isinstance(sp, dict):
        return None, None
    ci = sp.get("ci95")
    ci_t = (float(ci[0]), float(ci[1])) if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci else None
    return _num(sp.get("value")), ci_t


def fmt_speedup(sp: Any) -> str:
    value, ci = _speedup(sp)
    if value is None:
        return "n/a"
    return f"{value:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{value:.2f}x"


def _fmt(x: Any, scale: float = 1.0, digits: int = 1) -> str:
    v = _num(x)
    return "n/a" if v is None else f"{v * scale:.{digits}f}"


def level_views(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """[(level, level summary)]: summary.json keeps the first level at top level and all under "levels"."""
    levels = summary.get("levels")
    if isinstance(levels, dict) and levels:
        return [(str(k), v) for k, v in levels.items() if isinstance(v, dict)]
    return [(str(summary.get("level", "")), summary)]


def _variants(view: dict[str, Any]) -> list[str]:
    order = {"baseline": 0, "speculative": 1}
    return sorted((view.get("variants") or {}).keys(), key=lambda v: (order.get(v, 2), v))
