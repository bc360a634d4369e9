"""The terminal comparison table (text from the run is shown as data, never as markup)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectrn.report.format import (
    class_scopes,
    goodput_cells,
    num,
    slo_check_text,
    slo_names,
    speedup_of,
    speedup_text,
    stat,
    usd,
)
from spectrn.run.summary import ClassSummary, Summary

if TYPE_CHECKING:
    from rich.table import Table

ROWS = [  # (label, VariantSummary field, which, scale, digits, Speedups field)
    ("TTFT ms", "ttft_s", "p50", 1e3, 1, "ttft_p50"),
    ("TPOT ms", "tpot_s", "p50", 1e3, 1, "tpot_p50"),
    ("ITL ms", "itl_s", "p50", 1e3, 1, "itl_p50"),
    ("e2e s", "e2e_s", "p50", 1.0, 2, "e2e_p50"),
]


def _rows(cs: ClassSummary) -> list[tuple[str, str, str, str]]:
    b, s = cs.variants.get("baseline"), cs.variants.get("speculative")
    out = [
        (label, num(stat(b, f, w), sc, d), num(stat(s, f, w), sc, d), speedup_text(speedup_of(cs.speedup, k)))
        for label, f, w, sc, d, k in ROWS
    ]
    bt = b.output_tokens_per_s.per_request.p50 if b else None
    st = s.output_tokens_per_s.per_request.p50 if s else None
    out.append(("tok/s/req", num(bt, 1.0, 1), num(st, 1.0, 1), speedup_text(speedup_of(cs.speedup, "throughput"))))
    acc = s.acceptance if s is not None else None
    if acc is not None and acc.mean_accepted_length is not None:
        rate = f"{acc.rate:.0%}" if acc.rate is not None else "n/a"
        out.append(("acceptance", "", f"{acc.mean_accepted_length:.2f} tok/step, {rate} ({acc.source})", ""))
    bc = b.cost.usd_per_million_output_tokens if b and b.cost else None
    sc = s.cost.usd_per_million_output_tokens if s and s.cost else None
    if bc is not None or sc is not None:
        # the cost ratio is the aggregate throughput speedup (one price): shown with its paired interval
        paired = speedup_of(cs.speedup, "aggregate_throughput")
        ratio = speedup_text(paired) if paired is not None else f"{bc / sc:.2f}x" if bc and sc else "n/a"
        out.append(("$/M tokens", usd(bc), usd(sc), ratio))
    return out + _slo_rows(cs)


def _slo_rows(cs: ClassSummary) -> list[tuple[str, str, str, str]]:
    """Goodput (requests/s, output tokens/s; speculative / baseline) and each percentile SLO's observed value."""
    b, s = cs.variants.get("baseline"), cs.variants.get("speculative")
    per_request, checks = slo_names([("baseline", b), ("speculative", s)])
    out = []
    if per_request:
        (br, bt, bshare), (sr, st, sshare) = goodput_cells(b), goodput_cells(s)
        bg, sg = (b.goodput if b else None), (s.goodput if s else None)
        for label, bv, sv, key in (("goodput req/s", br, sr, "requests_per_s"), ("goodput tok/s", bt, st,
                                   "output_tokens_per_s")):  # fmt: skip
            x, y = getattr(bg, key, None), getattr(sg, key, None)
            out.append((label, bv, sv, f"{y / x:.2f}x" if x and y is not None else "n/a"))
        out.append(("within SLO", bshare, sshare, ""))
    for slo in checks:
        out.append((slo, slo_check_text(b, slo), slo_check_text(s, slo), ""))
    return out


def comparison_table(title: str, speedup_header: str, *, multi: bool) -> Table:
    """The empty baseline-vs-speculative table every comparison fills: (load,) class, metric, the two variants and
    the speedup."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title))
    columns = [("prompt class", "left"), ("metric", "left"), ("baseline", "right"), ("speculative", "right")]
    columns.append((speedup_header, "right"))
    if multi:
        columns.insert(0, ("load", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    return table


def render_table(summary: Summary) -> Table:
    """Baseline vs speculative per prompt class ("all" = pooled, first): p50s, acceptance, cost, speedups."""
    from rich.text import Text

    multi = len(summary.levels) > 1
    where = "" if multi else f" at {summary.levels[0].label}"
    title = f"spectrn {summary.run_id}{where}: baseline vs speculative (p50; speedup with 95% CI)"
    table = comparison_table(title, "speedup [95% CI]", multi=multi)
    for lv in summary.levels:
        for n, (cls, cs) in enumerate(class_scopes(lv)):
            rows = _rows(cs)
            for i, (name, b, s, sp) in enumerate(rows):
                label = ("all (pooled)" if cls == "all" else cls) if i == 0 else ""
                cells = [label, name, b, s, sp]
                if multi:
                    cells.insert(0, lv.label if (n == 0 and i == 0) else "")
                table.add_row(*(Text(c) for c in cells), end_section=(i == len(rows) - 1))
    return table
