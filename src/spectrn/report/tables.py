"""The terminal comparison table (text from the run is shown as data, never as markup)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spectrn.analyze.metric_table import displayed
from spectrn.labels import class_label
from spectrn.report.format import (
    class_scopes,
    goodput_cells,
    metric_speedup,
    metric_text,
    slo_check_text,
    slo_names,
    speedup_of,
    speedup_text,
    usd,
)
from spectrn.run.summary import ClassSummary, Summary

if TYPE_CHECKING:
    from rich.table import Table


def _rows(cs: ClassSummary) -> list[tuple[str, str, str, str]]:
    b, s = cs.variants.get("baseline"), cs.variants.get("speculative")
    # one row per metric the metric table shows in the terminal: its p50s and speedup
    out = [
        (m.display.short_header(), metric_text(b, m), metric_text(s, m), metric_speedup(cs.speedup, m))
        for m in displayed("terminal")
        if m.display is not None
    ]
    acc = s.acceptance if s is not None else None
    if acc is not None and acc.mean_accepted_length is not None:
        rate = f"{acc.rate:.0%}" if acc.rate is not None else "n/a"
        out.append(("acceptance", "", f"{acc.mean_accepted_length:.2f} tok/step, {rate} ({acc.source})", ""))
    bc = b.cost.usd_per_million_output_tokens if b and b.cost else None
    sc = s.cost.usd_per_million_output_tokens if s and s.cost else None
    if bc is not None or sc is not None:
        # the cost ratio with its paired interval (a class of a mixed level: from its billed share of the wall)
        paired = speedup_of(cs.speedup, "cost") or speedup_of(cs.speedup, "aggregate_throughput")
        ratio = speedup_text(paired) if paired is not None else f"{bc / sc:.2f}x" if bc and sc else "n/a"
        out.append(("$/M tokens", usd(bc), usd(sc), ratio))
    return out + _slo_rows(cs)


def _slo_rows(cs: ClassSummary) -> list[tuple[str, str, str, str]]:
    """Goodput (requests/s, output tokens/s; speculative / baseline) and each percentile SLO's observed value."""
    b, s = cs.variants.get("baseline"), cs.variants.get("speculative")
    per_request, checks = slo_names([b, s])
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
    """Baseline vs speculative per prompt class, then all classes pooled: p50s, acceptance, cost, speedups."""
    from rich.text import Text

    multi = len(summary.levels) > 1
    where = "" if multi else f" at {summary.levels[0].label}"
    # the setup as measured (the servers' draft and window where spectrn learnt them: summary.config_label)
    title = (
        f"spectrn {summary.run_id} ({summary.config_label}){where}: baseline vs speculative (p50; speedup with 95% CI)"
    )
    table = comparison_table(title, "speedup [95% CI]", multi=multi)
    for lv in summary.levels:
        for n, (cls, cs) in enumerate(class_scopes(lv)):
            rows = _rows(cs)
            for i, (name, b, s, sp) in enumerate(rows):
                label = class_label(cls) if i == 0 else ""
                cells = [label, name, b, s, sp]
                if multi:
                    cells.insert(0, lv.label if (n == 0 and i == 0) else "")
                table.add_row(*(Text(c) for c in cells), end_section=(i == len(rows) - 1))
    return table
