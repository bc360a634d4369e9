"""The headline: one TPOT speedup per load level and prompt class, and one for a declared traffic mix.

A figure pooled over classes is only a headline for a declared traffic mix, weighted by it (a median of a
two-peaked mix means nothing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from spectrn.run.summary import HeadlineItem, LevelSummary, Speedup


def mix_speedup(parts: Iterable[tuple[float, float, Speedup]]) -> Speedup | None:
    """TPOT speedup of a traffic mix: the mix's time per token is sum_c w_c B_c, so its speedup is
    sum_c w_c B_c / sum_c w_c B_c / S_c (B_c baseline TPOT, S_c speedup, w_c normalised). The interval
    comes from the per-class intervals by the delta method on log scale (classes are disjoint request sets)."""
    rows = [(w, b, s) for w, b, s in parts if w > 0 and b > 0 and s.value]
    if not rows:
        return None
    wsum = sum(w for w, _, _ in rows)
    num = sum(w / wsum * b for w, b, _ in rows)
    den = sum(w / wsum * b / (s.value or 1.0) for w, b, s in rows)
    value = num / den
    var = 0.0
    for w, b, s in rows:
        if s.ci95 is None or s.ci95[0] <= 0 or not s.value:
            return Speedup(value=value)
        se = (math.log(s.ci95[1]) - math.log(s.ci95[0])) / (2 * 1.96)
        share = (w / wsum * b / s.value) / den  # d log(mix) / d log(S_c)
        var += (share * se) ** 2
    half = 1.96 * math.sqrt(var)
    return Speedup(value=value, ci95=(value * math.exp(-half), value * math.exp(half)))


def _headline(levels: list[LevelSummary], mix: Mapping[str, float] | None) -> list[HeadlineItem]:
    out: list[HeadlineItem] = []
    for lv in levels:
        for cls, cs in sorted(lv.by_prompt_class.items()):
            if cs.speedup is not None and cs.speedup.tpot_p50 is not None:
                out.append(HeadlineItem(level=lv.label, scope=cls, speedup=cs.speedup.tpot_p50))
        if mix:
            parts = []
            for cls, w in mix.items():
                part = lv.by_prompt_class.get(cls)
                base = part.variants.get("baseline") if part else None
                if part is None or base is None or part.speedup is None or part.speedup.tpot_p50 is None:
                    continue
                parts.append((float(w), base.tpot_s.p50 or 0.0, part.speedup.tpot_p50))
            sp = mix_speedup(parts)
            if sp is not None:
                out.append(HeadlineItem(level=lv.label, scope="mix", speedup=sp))
    return out
