"""The terminal table of repeated runs (``repeats.json``): mean over runs, 95% interval, between-run CV."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from spectrn.intervals import interval_text
from spectrn.labels import class_label
from spectrn.report.format import num, pooled_last
from spectrn.run.repeats import RepeatedFigure, RepeatedScope, Repeats

if TYPE_CHECKING:
    from rich.table import Table

ROWS = [  # (label, RepeatedVariant field, scale, digits, RepeatedSpeedups field or None)
    ("TTFT p50 ms", "ttft_p50_s", 1e3, 1, "ttft_p50"),
    ("TPOT p50 ms", "tpot_p50_s", 1e3, 1, "tpot_p50"),
    ("aggregate tok/s", "output_tokens_per_s", 1.0, 1, "aggregate_throughput"),
    # the cost ratio is the aggregate throughput speedup (one price): shown once, on the row above
    ("$/M tokens", "usd_per_million_output_tokens", 1.0, 2, None),
]


def figure_text(fig: RepeatedFigure | None, scale: float = 1.0, digits: int = 1, *, ratio: bool = False) -> str:
    """``12.3 [11.9, 12.8] cv 1.4%`` (``x`` after a ratio; ``n/a`` without a point)."""
    if fig is None or fig.point is None:
        return "n/a"
    unit = "x" if ratio else ""
    text = f"{num(fig.point, scale, digits)}{unit}"
    if fig.ci95 is not None:
        text += interval_text(fig.ci95, digits, scale=scale)
    if fig.cv is not None and math.isfinite(fig.cv):
        text += f" cv {fig.cv:.1%}"
    return text


def _rows(sc: RepeatedScope) -> list[tuple[str, str, str, str]]:
    b, s = sc.variants.get("baseline"), sc.variants.get("speculative")
    out = []
    for label, field, scale, digits, sp in ROWS:
        cells = [figure_text(getattr(v, field) if v else None, scale, digits) for v in (b, s)]
        speed = getattr(sc.speedup, sp) if sc.speedup is not None and sp else None
        out.append((label, cells[0], cells[1], figure_text(speed, 1.0, 2, ratio=True) if sp else ""))
    return out


def repeats_table(rep: Repeats) -> Table:
    """Baseline vs speculative per prompt class, then all classes pooled: mean over the runs [95% CI] cv."""
    from rich.text import Text

    from spectrn.report.tables import comparison_table

    multi = len(rep.levels) > 1
    where = "" if multi or not rep.levels else f" at {rep.levels[0].label}"
    title = (
        f"spectrn {rep.run_id}{where}, {rep.repeats} runs: mean over runs [95% CI with the between-run variance] "
        "cv = between-run coefficient of variation"
    )
    table = comparison_table(title, "speedup", multi=multi)
    for lv in rep.levels:
        for n, (cls, sc) in enumerate(pooled_last(lv.scopes.items())):
            rows = _rows(sc)
            for i, (name, b, s, sp) in enumerate(rows):
                label = class_label(cls) if i == 0 else ""
                cells = [label, name, b, s, sp]
                if multi:
                    cells.insert(0, lv.label if (n == 0 and i == 0) else "")
                table.add_row(*(Text(c) for c in cells), end_section=(i == len(rows) - 1))
    return table
