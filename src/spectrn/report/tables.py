"""The terminal comparison table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spectrn.report.format import _fmt, _get, fmt_speedup, level_views

if TYPE_CHECKING:
    from rich.table import Table


def render_table(summary: dict[str, Any]) -> Table:
    """Baseline vs speculative per prompt class ("all" first): p50s and speedups with 95 % CIs."""
    from rich.table import Table

    run_id = summary.get("run_id", "?")
    views = level_views(summary)
    multi = len(views) > 1
    where = "" if multi or not views[0][0] else f" at {views[0][0]}"
    table = Table(title=f"spectrn {run_id}{where}: baseline vs speculative (p50; speedup with 95% CI)")
    columns = [("prompt class", "left"), ("metric", "left"), ("baseline", "right"), ("speculative", "right")]
    columns.append(("speedup [95% CI]", "right"))
    if multi:
        columns.insert(0, ("load", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for level, view in level_views(summary):
        classes: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
            ("all", view.get("variants") or {}, view.get("speedup") or {})
        ]
        for cls, per in sorted((view.get("by_prompt_class") or {}).items()):
            classes.append((cls, per, (view.get("speedup_by_prompt_class") or {}).get(cls) or {}))
        for n, (cls, per, sp) in enumerate(classes):
            rows = [
                ("TTFT ms", _get(per, "baseline", "ttft_s", "p50"), _get(per, "speculative", "ttft_s", "p50"), 1e3,
                 sp.get("ttft_p50")),
                ("TPOT ms", _get(per, "baseline", "tpot_s", "p50"), _get(per, "speculative", "tpot_s", "p50"), 1e3,
                 sp.get("tpot_p50")),
                ("ITL ms", _get(per, "baseline", "itl_s", "p50"), _get(per, "speculative", "itl_s", "p50"), 1e3,
                 sp.get("itl_p50")),
                ("e2e s", _get(per, "baseline", "e2e_s", "p50"), _get(per, "speculative", "e2e_s", "p50"), 1.0,
                 sp.get("e2e_p50")),
                ("tok/s/req", _get(per, "baseline", "output_tokens_per_s", "per_request", "p50"),
                 _get(per, "speculative", "output_tokens_per_s", "per_request", "p50"), 1.0, sp.get("throughput")),
            ]  # fmt: skip
            for i, (name, b, s, scale, spv) in enumerate(rows):
                cells = [
                    cls if i == 0 else "",
                    name,
                    _fmt(b, scale, 2 if scale == 1.0 else 1),
                    _fmt(s, scale, 2 if scale == 1.0 else 1),
                    fmt_speedup(spv),
                ]
                if multi:
                    cells.insert(0, level if (n == 0 and i == 0) else "")
                table.add_row(*cells, end_section=(i == len(rows) - 1))
    return table
