"""PNG plots of a run (matplotlib, imported lazily)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.errors import ConfigError
from spectrn.publish.datums import MetricsFn
from spectrn.report.format import (
    LATENCIES,
    SPEEDUPS,
    VARIANT_COLORS,
    _ci,
    _color,
    _get,
    _num,
    _speedup,
    _variants,
    level_views,
)
from spectrn.run.folder import RunData

if TYPE_CHECKING:
    pass


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
