"""Local reports: a self-contained HTML page with PNG plots, a Markdown summary, terminal tables.

``build_report(run_dir)`` writes ``<run_dir>/report/``:

- ``index.html``: one file, PNGs embedded as base64 data URIs, inline CSS, no external URL, so it opens
  offline and can be mailed or attached as a CI artifact;
- ``latency_cdf.png`` (TTFT, TPOT, per-token ITL, e2e CDFs per variant), ``latency_by_class.png`` (p50 bars
  with 95 % CI whiskers per prompt class), ``speedup.png`` (speedups with CIs), ``acceptance.png``
  (acceptance per draft position, tokens per decode chunk), ``throughput.png``, and ``load.png`` when the
  run has several load levels;
- ``summary.md``: the comparison as Markdown for a pull-request comment.

``render_table`` is the terminal comparison, ``compare_runs`` compares two runs, ``sweep_heatmap`` draws a
window x draft grid of speedups for sweeps. matplotlib (Agg, through ``Figure`` objects, no pyplot state)
and numpy are imported inside functions.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.errors import AnalysisError, ConfigError
from spectrn.publish.datums import MetricsFn, default_metrics_fn
from spectrn.run.folder import RunData, config_section, load_run

if TYPE_CHECKING:
    from rich.table import Table

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


# ---- terminal ------------------------------------------------------------------------------------------------


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


# ---- Markdown --------------------------------------------------------------------------------------------------


def summary_markdown(summary: dict[str, Any], config: dict[str, Any] | None = None) -> str:
    """A pull-request comment: verdict, config line, per-class table, acceptance, warnings."""
    cfg = config or {}
    lines = [f"### spectrn run `{summary.get('run_id', '?')}`", ""]
    if cfg:
        bench = config_section(cfg, "bench")
        lines.append(
            f"target `{cfg.get('target')}`, draft `{cfg.get('draft')}`, window {cfg.get('num_speculative_tokens')}, "
            f"mode {cfg.get('speculation_mode')}, {cfg.get('instance_type')} TP{cfg.get('tensor_parallel_size')}, "
            f"prompts {bench.get('prompts')}, max_tokens {bench.get('max_tokens')}, "
            f"temperature {bench.get('temperature')}"
        )
        lines.append("")
    verdict = "clean run" if summary.get("clean", True) else "**NOT A CLEAN RUN**"
    value, ci = _speedup(_get(summary, "speedup", "tpot_p50"))
    if value is not None:
        sig = ""
        if ci:
            sig = " (significant)" if ci[0] > 1 or ci[1] < 1 else " (not significant: the CI includes 1.0)"
        lines.append(f"**TPOT p50 speedup {fmt_speedup(_get(summary, 'speedup', 'tpot_p50'))}**{sig}; {verdict}")
    else:
        lines.append(verdict)
    lines.append("")
    for level, view in level_views(summary):
        if len(level_views(summary)) > 1:
            lines += [f"#### load {level}", ""]
        lines += [
            "| prompt class | TPOT p50 ms (base → spec) | speedup | ITL p50 ms | speedup | e2e p50 s | speedup "
            "| tok/s/req p50 | speedup |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        groups = [("all", view.get("variants") or {}, view.get("speedup") or {})]
        for cls, per in sorted((view.get("by_prompt_class") or {}).items()):
            groups.append((cls, per, (view.get("speedup_by_prompt_class") or {}).get(cls) or {}))
        for cls, per, sp in groups:
            cells = [cls]
            for key, spk, scale, digits in (
                (("tpot_s", "p50"), "tpot_p50", 1e3, 1),
                (("itl_s", "p50"), "itl_p50", 1e3, 1),
                (("e2e_s", "p50"), "e2e_p50", 1.0, 2),
                (("output_tokens_per_s", "per_request", "p50"), "throughput", 1.0, 1),
            ):
                b = _fmt(_get(per, "baseline", *key), scale, digits)
                s = _fmt(_get(per, "speculative", *key), scale, digits)
                cells += [f"{b} → {s}", fmt_speedup(sp.get(spk))]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        acc = _get(view, "variants", "speculative", "acceptance")
        if isinstance(acc, dict) and _num(acc.get("rate")) is not None:
            length = _num(acc.get("mean_accepted_length"))
            lines.append(
                f"acceptance rate {100 * acc['rate']:.1f} %"
                + (f", mean acceptance length {length:.2f}" if length is not None else "")
            )
        else:
            tpc = _num(_get(view, "variants", "speculative", "tokens_per_chunk_mean"))
            lines.append(
                "acceptance: not reported by the server"
                + (f" (tokens per decode chunk {tpc:.2f})" if tpc is not None else "")
            )
        cost = view.get("cost") or {}
        cb = _num(_get(cost, "baseline", "usd_per_million_output_tokens"))
        cs = _num(_get(cost, "speculative", "usd_per_million_output_tokens"))
        if cb is not None and cs is not None:
            lines.append(f"cost per million output tokens: ${cb:.2f} → ${cs:.2f}")
        lines.append("")
    warnings = summary.get("warnings") or []
    if warnings:
        lines.append("**Warnings**")
        lines += [f"- {w}" for w in warnings]
        lines.append("")
    lines.append(
        "_TPOT = (e2e − TTFT)/(tokens − 1); per-token ITL splits multi-token chunks; speedup = baseline / "
        "speculative (throughput: speculative / baseline); 95 % bootstrap CIs._"
    )
    return "\n".join(lines) + "\n"


# ---- plots ------------------------------------------------------------------------------------------------------


def _figure(w: float, h: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    return fig


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, format="png", dpi=100, metadata={"Software": "spectrn"})
    return path


def _values_by_variant(run: RunData, metrics_fn: MetricsFn) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for rec in run.records:
        rm = metrics_fn(rec) if rec.ok else None
        if rm is None:
            continue
        d = out.setdefault(rec.variant, {"ttft_s": [], "tpot_s": [], "itl_s": [], "e2e_s": [], "tput": []})
        for key, v in (("ttft_s", rm.ttft), ("tpot_s", rm.tpot), ("e2e_s", rm.e2e), ("tput", rm.throughput_tok_s)):
            if v is not None and math.isfinite(v):
                d[key].append(float(v))
        d["itl_s"].extend(x for x in rm.itls or [] if math.isfinite(x))
    return out


def plot_latency_cdfs(values: dict[str, dict[str, list[float]]], path: Path) -> Path:
    import numpy as np

    fig = _figure(11, 7.5)
    axes = fig.subplots(2, 2)
    order = sorted(values, key=lambda v: ({"baseline": 0, "speculative": 1}.get(v, 2), v))
    for ax, (key, label, scale, unit) in zip(axes.flat, LATENCIES, strict=True):
        for i, variant in enumerate(order):
            xs = np.sort(np.asarray(values[variant][key], dtype=float)) * scale
            if xs.size == 0:
                continue
            med = float(np.median(xs))
            ys = np.arange(1, xs.size + 1) / xs.size
            if xs.size > 4000:  # millions of ITL gaps: 4000 evenly spaced quantiles draw the same curve
                keep = np.linspace(0, xs.size - 1, 4000).astype(int)
                xs, ys = xs[keep], ys[keep]
            ax.step(xs, ys, where="post", color=_color(variant, i), lw=1.8, label=f"{variant} (p50 {med:.3g} {unit})")
            ax.axvline(med, color=_color(variant, i), ls=":", lw=1)
        ax.set_title(f"{label} CDF")
        ax.set_xlabel(f"{label} ({unit})")
        ax.set_ylabel("fraction of samples ≤ x")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("Latency distributions, all prompt classes (dotted: medians)")
    return _save(fig, path)


def _grouped_bars(ax: Any, classes: list[str], series: list[tuple[str, list[float | None], list[Any]]]) -> None:
    import numpy as np

    x = np.arange(len(classes))
    width = 0.8 / max(1, len(series))
    for i, (variant, vals, cis) in enumerate(series):
        pos = x - 0.4 + width * (i + 0.5)
        heights = [v if v is not None else 0.0 for v in vals]
        lo = [max(0.0, v - c[0]) if v is not None and c else 0.0 for v, c in zip(vals, cis, strict=True)]
        hi = [max(0.0, c[1] - v) if v is not None and c else 0.0 for v, c in zip(vals, cis, strict=True)]
        ax.bar(pos, heights, width * 0.95, color=_color(variant, i), label=variant)
        with_ci = [k for k, c in enumerate(cis) if c is not None and vals[k] is not None]
        if with_ci:
            ax.errorbar(
                [pos[k] for k in with_ci],
                [heights[k] for k in with_ci],
                yerr=[[lo[k] for k in with_ci], [hi[k] for k in with_ci]],
                fmt="none",
                ecolor="black",
                capsize=3,
                lw=1,
            )
        for p, v in zip(pos, vals, strict=True):
            if v is None:
                ax.text(p, 0, "n/a", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, classes, rotation=20 if len(classes) > 4 else 0, ha="right" if len(classes) > 4 else "center")
    ax.grid(axis="y", alpha=0.3)


def _bar_legend(ax: Any) -> None:
    # Head room above the tallest bar (or whisker) so the legend never hides one.
    ax.set_ylim(0, ax.get_ylim()[1] * 1.18)
    ax.legend(fontsize=8, loc="upper center", ncol=4, frameon=False)


def plot_latency_by_class(view: dict[str, Any], path: Path) -> Path:
    fig = _figure(13, 4.5)
    axes = fig.subplots(1, 3)
    per_class = view.get("by_prompt_class") or {}
    classes = ["all", *sorted(per_class)]
    variants = _variants(view)
    for ax, (key, label, scale, unit) in zip(axes, [LATENCIES[1], LATENCIES[2], LATENCIES[3]], strict=True):
        series = []
        for v in variants:
            vals, cis = [], []
            for cls in classes:
                stats = _get(view, "variants", v, key) if cls == "all" else _get(per_class, cls, v, key)
                p50 = _num(_get(stats, "p50"))
                ci = _ci(stats)
                vals.append(p50 * scale if p50 is not None else None)
                cis.append((ci[0] * scale, ci[1] * scale) if ci else None)
            series.append((v, vals, cis))
        _grouped_bars(ax, classes, series)
        ax.set_title(f"{label} p50 per prompt class")
        ax.set_ylabel(f"{label} ({unit})")
        _bar_legend(ax)
    fig.suptitle("Medians with 95% bootstrap confidence intervals")
    return _save(fig, path)


def plot_speedups(view: dict[str, Any], path: Path) -> Path:
    import numpy as np

    per_class = view.get("speedup_by_prompt_class") or {}
    groups = [("all", view.get("speedup") or {}), *sorted(per_class.items())]
    fig = _figure(11, 1.2 + 0.9 * len(groups))
    ax = fig.subplots(1, 1)
    keys = [k for k in SPEEDUPS if k[0] != "ttft_p50"]
    height = 0.8 / len(keys)
    y = np.arange(len(groups))
    colors = ["#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]
    for i, (key, label) in enumerate(keys):
        vals, lo, hi = [], [], []
        for _, sp in groups:
            value, ci = _speedup(sp.get(key))
            vals.append(value if value is not None else 0.0)
            lo.append(max(0.0, value - ci[0]) if value is not None and ci else 0.0)
            hi.append(max(0.0, ci[1] - value) if value is not None and ci else 0.0)
        pos = y - 0.4 + height * (i + 0.5)
        ax.barh(pos, vals, height * 0.9, color=colors[i], label=label)
        ax.errorbar(vals, pos, xerr=[lo, hi], fmt="none", ecolor="black", capsize=2, lw=1)
        for p, v, h in zip(pos, vals, hi, strict=True):
            if v:
                ax.text(v + h, p, f"  {v:.2f}x", va="center", fontsize=7)
    ax.axvline(1.0, color="black", lw=1.2)
    ax.set_yticks(y, [g[0] for g in groups])
    ax.invert_yaxis()
    ax.set_xlabel("speedup (baseline / speculative; throughput: speculative / baseline); > 1 = speculation helps")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.margins(x=0.12)
    ax.set_title("Speedups per prompt class with 95% CIs")
    return _save(fig, path)


def plot_acceptance(view: dict[str, Any], path: Path) -> Path:
    fig = _figure(11, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    acc = _get(view, "variants", "speculative", "acceptance")
    per_pos = acc.get("per_position") if isinstance(acc, dict) else None
    if isinstance(per_pos, list) and per_pos and all(_num(p) is not None for p in per_pos):
        pos = list(range(1, len(per_pos) + 1))
        ax1.bar(pos, [100 * float(p) for p in per_pos], color=VARIANT_COLORS["speculative"])
        for p, v in zip(pos, per_pos, strict=True):
            ax1.text(p, 100 * float(v), f"{100 * float(v):.0f}%", ha="center", va="bottom", fontsize=8)
        ax1.set_xticks(pos)
        ax1.set_ylim(0, 105)
        rate, length = _num(acc.get("rate")), _num(acc.get("mean_accepted_length"))
        sub = []
        if rate is not None:
            sub.append(f"rate {100 * rate:.1f}%")
        if length is not None:
            sub.append(f"mean acceptance length {length:.2f}")
        ax1.set_title("Acceptance per draft position" + (f"\n({', '.join(sub)})" if sub else ""))
    else:
        ax1.text(0.5, 0.5, "the server reported no\nper-position acceptance counters", ha="center", va="center")
        ax1.set_title("Acceptance per draft position")
    ax1.set_xlabel("draft position")
    ax1.set_ylabel("accepted (%)")
    ax1.grid(axis="y", alpha=0.3)
    per_class = view.get("by_prompt_class") or {}
    classes = ["all", *sorted(per_class)]
    series = []
    for v in _variants(view):
        vals = []
        for cls in classes:
            node = _get(view, "variants", v) if cls == "all" else _get(per_class, cls, v)
            vals.append(_num(_get(node, "tokens_per_chunk_mean")))
        series.append((v, vals, [None] * len(classes)))
    _grouped_bars(ax2, classes, series)
    ax2.axhline(1.0, color="black", lw=0.8)
    ax2.set_title("Tokens per decode chunk (client side; 1 = no speculation)")
    ax2.set_ylabel("tokens per chunk")
    _bar_legend(ax2)
    return _save(fig, path)


def plot_throughput(view: dict[str, Any], values: dict[str, dict[str, list[float]]], path: Path) -> Path:
    fig = _figure(11, 4.2)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[2, 1])
    per_class = view.get("by_prompt_class") or {}
    classes = ["all", *sorted(per_class)]
    series = []
    for v in _variants(view):
        vals: list[float | None] = []
        cis: list[Any] = []
        for cls in classes:
            node = _get(view, "variants", v) if cls == "all" else _get(per_class, cls, v)
            vals.append(_num(_get(node, "output_tokens_per_s", "per_request", "p50")))
            cis.append(None)
        series.append((v, vals, cis))
    _grouped_bars(ax1, classes, series)
    ax1.set_title("Output tokens/s per request (p50) per prompt class")
    ax1.set_ylabel("tokens/s")
    _bar_legend(ax1)
    variants = _variants(view)
    agg = [_num(_get(view, "variants", v, "output_tokens_per_s", "aggregate")) or 0.0 for v in variants]
    ax2.bar(variants, agg, color=[_color(v, i) for i, v in enumerate(variants)])
    for i, (v, a) in enumerate(zip(variants, agg, strict=True)):
        cost = _num(_get(view, "cost", v, "usd_per_million_output_tokens"))
        label = f"{a:.1f} tok/s" + (f"\n${cost:.2f}/M tok" if cost is not None else "")
        ax2.text(i, a, label, ha="center", va="bottom", fontsize=8)
    ax2.set_title("Aggregate output throughput")
    ax2.set_ylabel("tokens/s (all requests)")
    ax2.set_ylim(0, max(agg + [1.0]) * 1.3)
    ax2.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_load_levels(summary: dict[str, Any], path: Path) -> Path:
    fig = _figure(11, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    views = level_views(summary)
    labels = [lv for lv, _ in views]
    variants = sorted({v for _, view in views for v in _variants(view)})
    for i, v in enumerate(variants):
        tpot = [_num(_get(view, "variants", v, "tpot_s", "p50")) for _, view in views]
        agg = [_num(_get(view, "variants", v, "output_tokens_per_s", "aggregate")) for _, view in views]
        ax1.plot(labels, [x * 1e3 if x is not None else float("nan") for x in tpot], "o-", color=_color(v, i), label=v)
        ax2.plot(labels, [x if x is not None else float("nan") for x in agg], "o-", color=_color(v, i), label=v)
    ax1.set_title("TPOT p50 by load level")
    ax1.set_ylabel("ms")
    ax2.set_title("Aggregate output throughput by load level")
    ax2.set_ylabel("tokens/s")
    for ax in (ax1, ax2):
        ax.set_ylim(bottom=0)
        ax.set_xlabel("load level")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def sweep_heatmap(
    matrix: Sequence[dict[str, Any]],
    path: Path,
    *,
    title: str = "TPOT p50 speedup by draft and window",
    value_label: str = "speedup",
) -> Path:
    """A window x draft heatmap per prompt class from cells ``{draft, window, prompt_class, speedup, ci95}``.

    Cells are annotated with the value and its CI; the best cell of each class is outlined; missing
    combinations stay grey. The colour scale is centred on 1.0 (no change).
    """
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    if not matrix:
        raise ConfigError(
            "sweep_heatmap needs at least one cell", hint="pass cells {draft, window, prompt_class, speedup}"
        )
    for n, c in enumerate(matrix):
        missing = {"draft", "window", "speedup"} - set(c)
        if missing:
            raise ConfigError(f"sweep cell {n} lacks {sorted(missing)}", hint="each cell needs draft, window, speedup")
    classes = sorted({str(c.get("prompt_class") or "all") for c in matrix}, key=lambda c: (c != "all", c))
    drafts = sorted({str(c["draft"]) for c in matrix})
    windows = sorted({int(c["window"]) for c in matrix})
    vals = [v for c in matrix if (v := _num(c.get("speedup"))) is not None]
    vmin, vmax = min(vals + [1.0]), max(vals + [1.0])
    if vmin >= 1.0:
        vmin = 1.0 - 1e-3
    if vmax <= 1.0:
        vmax = 1.0 + 1e-3
    norm = TwoSlopeNorm(vcenter=1.0, vmin=vmin, vmax=vmax)
    ncls = len(classes)
    fig = _figure(max(5.0, 1.2 * len(windows) + 2.5) * min(ncls, 3), (1.0 * len(drafts) + 1.8) * math.ceil(ncls / 3))
    axes = list(np.atleast_1d(fig.subplots(math.ceil(ncls / 3), min(ncls, 3), squeeze=False)).flat)
    image = None
    for ax, cls in zip(axes, classes, strict=False):
        grid = np.full((len(drafts), len(windows)), np.nan)
        notes: dict[tuple[int, int], str] = {}
        for c in matrix:
            if str(c.get("prompt_class") or "all") != cls:
                continue
            i, j = drafts.index(str(c["draft"])), windows.index(int(c["window"]))
            v = _num(c.get("speedup"))
            if v is None:
                continue
            grid[i, j] = v
            ci = c.get("ci95")
            note = f"{v:.2f}x"
            if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci:
                note += f"\n[{ci[0]:.2f}, {ci[1]:.2f}]"
            notes[(i, j)] = note
        ax.set_facecolor("#dddddd")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn", norm=norm, aspect="auto")
        for (i, j), note in notes.items():
            dark = abs(float(norm(grid[i, j])) - 0.5) > 0.35  # deep red or green: white text stays readable
            ax.text(j, i, note, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        if np.isfinite(grid).any():
            bi, bj = np.unravel_index(np.nanargmax(grid), grid.shape)
            ax.add_patch(Rectangle((bj - 0.5, bi - 0.5), 1, 1, fill=False, ec="black", lw=2.5))
        ax.set_xticks(range(len(windows)), [str(w) for w in windows])
        ax.set_yticks(range(len(drafts)), drafts)
        ax.set_xlabel("window (num_speculative_tokens)")
        ax.set_ylabel("draft")
        ax.set_title(cls)
    for ax in axes[ncls:]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=fig.axes[:ncls], label=value_label, shrink=0.8)
    fig.suptitle(f"{title} (outlined: best; grey: not measured)")
    path.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, path)


# ---- HTML ------------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1150px;color:#222;
padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.ok{color:#17803d;font-weight:bold}.bad{color:#b00020;font-weight:bold}.warn{background:#fff4e5;
border-left:4px solid #f0a020;padding:.5em 1em;margin:.3em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.9em}
.muted{color:#777;font-size:.85em}code{background:#f5f5f5;padding:0 .2em}
"""


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _display_url(url: str) -> str:
    # Shown as text, never as a link: the report must not reference anything outside itself.
    return re.sub(r"\b[A-Za-z][A-Za-z0-9+.-]*://", "", url)


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _html_table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _comparison_rows(view: dict[str, Any]) -> list[list[str]]:
    rows = []
    groups = [("all", view.get("variants") or {}, view.get("speedup") or {})]
    for cls, per in sorted((view.get("by_prompt_class") or {}).items()):
        groups.append((cls, per, (view.get("speedup_by_prompt_class") or {}).get(cls) or {}))
    for cls, per, sp in groups:
        for key, label, scale, unit in LATENCIES:
            spk = {"ttft_s": "ttft_p50", "tpot_s": "tpot_p50", "itl_s": "itl_p50", "e2e_s": "e2e_p50"}[key]
            digits = 2 if unit == "s" else 1
            b, s = _get(per, "baseline", key), _get(per, "speculative", key)
            rows.append(
                [
                    cls,
                    f"{label} ({unit})",
                    _fmt(_get(b, "p50"), scale, digits),
                    _fmt(_get(b, "p90"), scale, digits),
                    _fmt(_get(b, "p99"), scale, digits),
                    _fmt(_get(s, "p50"), scale, digits),
                    _fmt(_get(s, "p90"), scale, digits),
                    _fmt(_get(s, "p99"), scale, digits),
                    fmt_speedup(sp.get(spk)),
                ]
            )
        tb = _get(per, "baseline", "output_tokens_per_s", "per_request")
        ts = _get(per, "speculative", "output_tokens_per_s", "per_request")
        rows.append(
            [cls, "tok/s per request"]
            + [_fmt(_get(tb, q)) for q in ("p50", "p90", "p99")]
            + [_fmt(_get(ts, q)) for q in ("p50", "p90", "p99")]
            + [fmt_speedup(sp.get("throughput"))]
        )
    return rows


def report_html(run: RunData, summary: dict[str, Any], images: list[tuple[str, Path, str]], markdown: str) -> str:
    """The whole report as one HTML string (images inlined)."""
    from spectrn import __version__

    cfg = run.config
    bench = config_section(cfg, "bench")
    clean = summary.get("clean", True)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>spectrn report {_e(run.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>spectrn run {_e(run.run_id)}</h1>",
        f'<p class="{"ok" if clean else "bad"}">{"clean run" if clean else "NOT A CLEAN RUN"}</p>',
    ]
    for w in summary.get("warnings") or []:
        parts.append(f'<div class="warn">{_e(w)}</div>')
    value, ci = _speedup(_get(summary, "speedup", "tpot_p50"))
    if value is not None:
        parts.append(
            f"<p><b>TPOT p50 speedup {_e(fmt_speedup(_get(summary, 'speedup', 'tpot_p50')))}</b> "
            f"(baseline / speculative, paired by request, 95% bootstrap CI)</p>"
        )
    parts.append("<h2>Configuration</h2>")
    conf_rows = [
        ["target", str(cfg.get("target"))],
        ["draft", str(cfg.get("draft"))],
        ["window (num_speculative_tokens)", str(cfg.get("num_speculative_tokens"))],
        ["speculation mode", str(cfg.get("speculation_mode"))],
        ["vLLM dialect", str(cfg.get("vllm_dialect"))],
        ["instance", f"{cfg.get('instance_type')} TP{cfg.get('tensor_parallel_size')}"],
        ["max-num-seqs / max-model-len", f"{cfg.get('max_num_seqs')} / {cfg.get('max_model_len')}"],
        ["prompts", str(bench.get("prompts"))],
        ["load", ", ".join(run.levels) or "?"],
        ["requests per endpoint", str(bench.get("requests"))],
        ["max_tokens / temperature", f"{bench.get('max_tokens')} / {bench.get('temperature')}"],
        ["runtime", str(cfg.get("runtime"))],
    ]
    for variant, url in sorted(run.meta.endpoints.items()):
        conf_rows.append([f"endpoint {variant}", _display_url(url)])
    start, end = run.time_range()
    conf_rows.append(["time (UTC)", f"{_utc(start)} to {_utc(end)}"])
    conf_rows += _publish_rows(run.run_dir)
    parts.append(_html_table(["setting", "value"], conf_rows, left=2))
    for level, view in level_views(summary):
        title = "Comparison" + (f" at load {level}" if len(level_views(summary)) > 1 else "")
        parts.append(f"<h2>{_e(title)}</h2>")
        parts.append(
            _html_table(
                ["prompt class", "metric", "base p50", "base p90", "base p99", "spec p50", "spec p90", "spec p99",
                 "speedup [95% CI]"],
                _comparison_rows(view),
                left=2,
            )
        )  # fmt: skip
        req_rows = []
        for v in _variants(view):
            rq = _get(view, "variants", v, "requests") or {}
            acc = _get(view, "variants", v, "acceptance")
            req_rows.append(
                [
                    v,
                    str(rq.get("completed", "?")),
                    str(rq.get("errors", "?")),
                    ", ".join(f"{k}: {n}" for k, n in (rq.get("error_classes") or {}).items()) or "-",
                    _fmt(_get(view, "variants", v, "tokens_per_chunk_mean"), 1.0, 2),
                    f"{100 * acc['rate']:.1f}%" if isinstance(acc, dict) and _num(acc.get("rate")) is not None else "-",
                    _fmt(_get(acc, "mean_accepted_length"), 1.0, 2) if isinstance(acc, dict) else "-",
                    _fmt(_get(view, "cost", v, "usd_per_million_output_tokens"), 1.0, 2),
                ]
            )
        parts.append(
            _html_table(
                ["variant", "completed", "errors", "error classes", "tokens/chunk", "acceptance",
                 "mean accepted length", "$/M output tokens"],
                req_rows,
            )
        )  # fmt: skip
        eq = view.get("equivalence")
        if isinstance(eq, dict) and eq.get("compared"):
            same = eq.get("matched") == eq.get("compared")
            parts.append(
                f'<p class="{"ok" if same else "bad"}">output equivalence: {_e(eq.get("matched"))}/'
                f"{_e(eq.get('compared'))} greedy outputs identical ({_e(eq.get('basis'))})</p>"
            )
    parts.append("<h2>Plots</h2>")
    for title, path, caption in images:
        parts.append(
            f'<figure><img alt="{_e(title)}" src="{_data_uri(path)}"><figcaption><b>{_e(title)}.</b> '
            f"{_e(caption)}</figcaption></figure>"
        )
    parts.append("<h2>Pull-request summary (summary.md)</h2>")
    parts.append(f"<pre>{_e(markdown)}</pre>")
    parts.append(
        f'<p class="muted">spectrn {_e(__version__)}, written {_e(_utc(time.time()))}. Definitions: TPOT = (e2e − '
        "TTFT)/(tokens − 1); per-token ITL counts a chunk of k tokens after gap g as k gaps of g/k; llmperf-compatible "
        "ITL is in summary.json only.</p></body></html>"
    )
    return "\n".join(parts)


def _publish_rows(run_dir: Path) -> list[list[str]]:
    """Where the run's metrics went: the EMF file and each CloudWatch target in publish.json."""
    from spectrn.publish.emf import EMF_FILE
    from spectrn.publish.publisher import STATE_FILE

    rows = []
    if (run_dir / EMF_FILE).exists():
        rows.append(["EMF metrics", EMF_FILE])
    try:
        targets = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8")).get("targets", {})
    except (OSError, ValueError, AttributeError):
        return rows
    for t in targets.values() if isinstance(targets, dict) else []:
        if not isinstance(t, dict):
            continue
        sent, total = len(t.get("sent") or {}), t.get("batches", "?")
        dash = (t.get("dashboard") or {}).get("name")
        rows.append(
            [
                "CloudWatch",
                f"namespace {t.get('namespace')} ({_display_url(str(t.get('target')))}): {sent}/{total} calls sent"
                + (f", dashboard {dash}" if dash else ""),
            ]
        )
    return rows


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def run_summary(run: RunData) -> dict[str, Any]:
    if run.summary is not None:
        return run.summary
    from spectrn.analyze.summary import finite, summarize

    if not run.records:
        raise AnalysisError(f"run {run.run_id} has no measured requests", hint="check requests.jsonl")
    return dict(finite(summarize(run.records, run_id=run.run_id, acceptance=run.acceptance, config=run.config)))


def build_report(run_dir: Path, out_dir: Path | None = None, *, metrics_fn: MetricsFn | None = None) -> Path:
    """Write ``report/index.html``, ``report/*.png`` and ``report/summary.md``; returns the HTML path.

    Uses ``summary.json`` when present (else computes the summary in memory without writing it).
    """
    from spectrn.paths import atomic_write_text, safe_output_dir

    run = load_run(Path(run_dir))
    summary = run_summary(run)
    out = safe_output_dir(Path(out_dir) if out_dir else Path(run_dir) / "report", what="report folder")
    values = _values_by_variant(run, metrics_fn or default_metrics_fn())
    first = level_views(summary)[0][1]
    images: list[tuple[str, Path, str]] = []
    if values:
        images.append(
            (
                "Latency CDFs",
                plot_latency_cdfs(values, out / "latency_cdf.png"),
                "Empirical CDFs per variant over all measured requests; further left is faster.",
            )
        )
    images += [
        (
            "Latency per prompt class",
            plot_latency_by_class(first, out / "latency_by_class.png"),
            "p50 per prompt class with 95% bootstrap confidence intervals (whiskers).",
        ),
        (
            "Speedups",
            plot_speedups(first, out / "speedup.png"),
            "Paired speedups with 95% CIs; a whisker crossing 1.0 means no significant difference.",
        ),
        (
            "Acceptance",
            plot_acceptance(first, out / "acceptance.png"),
            "Server-side acceptance per draft position (counter deltas) and client-side tokens per decode chunk.",
        ),
        (
            "Throughput",
            plot_throughput(first, values, out / "throughput.png"),
            "Per-request output tokens/s per prompt class, and aggregate throughput with cost per million tokens.",
        ),
    ]
    if len(level_views(summary)) > 1:
        images.append(
            (
                "Load levels",
                plot_load_levels(summary, out / "load.png"),
                "TPOT and aggregate throughput across load levels: where speculation stops paying off.",
            )
        )
    markdown = summary_markdown(summary, run.config)
    atomic_write_text(out / "summary.md", markdown)
    index = out / "index.html"
    atomic_write_text(index, report_html(run, summary, images, markdown))
    for f in (index, out / "summary.md"):
        f.chmod(0o644)  # a report is meant to be shared (atomic writes create 0600 files)
    return index


# ---- comparing two runs -----------------------------------------------------------------------------------------


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix.rstrip(".")] = d
    return out


def compare_runs(a: Path | RunData, b: Path | RunData) -> dict[str, Any]:
    """Compare run B against run A: configuration differences, p50s and speedups per class and variant.

    ``ratio`` is B / A (for latencies < 1 means B is faster); ``speedups`` lists each run's own
    baseline-vs-speculative speedup side by side. Load levels present in both runs are compared level by
    level; without a common level, each run's first level is compared (``pairs`` says which).
    """
    ra = a if isinstance(a, RunData) else load_run(Path(a))
    rb = b if isinstance(b, RunData) else load_run(Path(b))
    sa, sb = run_summary(ra), run_summary(rb)
    fa, fb = _flatten(ra.config), _flatten(rb.config)
    diffs = {k: [fa.get(k), fb.get(k)] for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)}
    va_levels, vb_levels = dict(level_views(sa)), dict(level_views(sb))
    common = [lv for lv in va_levels if lv in vb_levels]
    pairs = [(lv, lv) for lv in common] or [(next(iter(va_levels)), next(iter(vb_levels)))]
    rows: list[dict[str, Any]] = []
    speed: list[dict[str, Any]] = []
    for level_a, level_b in pairs:
        view_a, view_b = va_levels[level_a], vb_levels[level_b]
        level = level_a if level_a == level_b else f"{level_a} vs {level_b}"
        classes = sorted(set(view_a.get("by_prompt_class") or {}) | set(view_b.get("by_prompt_class") or {}))
        for cls in ["all", *classes]:
            for variant in ("baseline", "speculative"):
                for key, label, scale, unit in [
                    *LATENCIES,
                    ("output_tokens_per_s.per_request", "tok/s per request", 1.0, "tok/s"),
                ]:
                    path = key.split(".")
                    where: tuple[str, ...] = (
                        ("variants", variant) if cls == "all" else ("by_prompt_class", cls, variant)
                    )
                    va = _num(_get(_get(view_a, *where, *path), "p50"))
                    vb = _num(_get(_get(view_b, *where, *path), "p50"))
                    rows.append(
                        {
                            "level": level,
                            "prompt_class": cls,
                            "variant": variant,
                            "metric": f"{label} p50",
                            "unit": unit,
                            "a": va * scale if va is not None else None,
                            "b": vb * scale if vb is not None else None,
                            "ratio": (vb / va) if va and vb is not None else None,
                        }
                    )
            for key, label in SPEEDUPS:
                sp_where: tuple[str, ...] = ("speedup",) if cls == "all" else ("speedup_by_prompt_class", cls)
                (xa, cia), (xb, cib) = _speedup(_get(view_a, *sp_where, key)), _speedup(_get(view_b, *sp_where, key))
                speed.append(
                    {"level": level, "prompt_class": cls, "metric": label, "a": xa, "a_ci95": cia, "b": xb,
                     "b_ci95": cib}
                )  # fmt: skip
    return {
        "a": {"run_id": ra.run_id, "config": ra.config_label, "clean": sa.get("clean", True)},
        "b": {"run_id": rb.run_id, "config": rb.config_label, "clean": sb.get("clean", True)},
        "pairs": [list(p) for p in pairs],
        "config_differences": diffs,
        "rows": rows,
        "speedups": speed,
    }


def compare_table(cmp: dict[str, Any]) -> Table:
    from rich.table import Table

    a, b = cmp["a"], cmp["b"]
    t = Table(title=f"speedups: A = {a['run_id']} ({a['config']})  vs  B = {b['run_id']} ({b['config']})")
    for col in ("load", "prompt class", "speedup of", "A [95% CI]", "B [95% CI]", "B - A"):
        t.add_column(col, justify="left" if col in ("load", "prompt class", "speedup of") else "right", no_wrap=True)
    last = None
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        t.add_row(
            r["level"] if (r["level"], r["prompt_class"]) != last else "",
            r["prompt_class"] if (r["level"], r["prompt_class"]) != last else "",
            r["metric"],
            fmt_speedup({"value": r["a"], "ci95": r["a_ci95"]}),
            fmt_speedup({"value": r["b"], "ci95": r["b_ci95"]}),
            diff,
        )
        last = (r["level"], r["prompt_class"])
    return t


def compare_markdown(cmp: dict[str, Any]) -> str:
    a, b = cmp["a"], cmp["b"]
    lines = [
        f"### spectrn: `{b['run_id']}` ({b['config']}) vs `{a['run_id']}` ({a['config']})",
        "",
        "| load | prompt class | speedup of | A | B | B − A |",
        "|---|---|---|---|---|---|",
    ]
    for r in cmp["speedups"]:
        diff = f"{r['b'] - r['a']:+.2f}" if r["a"] is not None and r["b"] is not None else "n/a"
        lines.append(
            f"| {r['level']} | {r['prompt_class']} | {r['metric']} | "
            f"{fmt_speedup({'value': r['a'], 'ci95': r['a_ci95']})} | "
            f"{fmt_speedup({'value': r['b'], 'ci95': r['b_ci95']})} | {diff} |"
        )
    diffs = {k: v for k, v in cmp["config_differences"].items()}
    if diffs:
        lines += ["", "Configuration differences (A → B):", ""]
        lines += [f"- `{k}`: {json.dumps(v[0])} → {json.dumps(v[1])}" for k, v in list(diffs.items())[:30]]
    for side in ("a", "b"):
        if not cmp[side]["clean"]:
            lines.append(f"\n**run {cmp[side]['run_id']} is not clean**")
    return "\n".join(lines) + "\n"
