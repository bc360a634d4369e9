"""PNG plots of a run (matplotlib, imported lazily). Every figure is in real time (see ``Summary.provenance``)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spectrn.errors import ConfigError
from spectrn.intervals import NO_SPREAD, interval_text
from spectrn.labels import class_label
from spectrn.publish.datums import MetricsFn
from spectrn.report.format import LATENCIES, SPEEDUPS, VARIANT_COLORS, class_scopes, color, speedup_of
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Interval, LevelSummary, Stats, Summary, VariantSummary

CDF_SAMPLE_REQUESTS = 20_000  # the CDFs draw a uniform random sample of at most this many requests per variant
CDF_MAX_ITL_REQUESTS = 2000  # ... and the ITL gaps of a uniform random sample of at most this many of them
CDF_SAMPLE_SEED = 0
CDF_METHOD = (
    f"uniform random sample of at most {CDF_SAMPLE_REQUESTS:,} requests per variant (reservoir, seed "
    f"{CDF_SAMPLE_SEED}); ITL from at most {CDF_MAX_ITL_REQUESTS:,} of them"
)


def _figure(w: float, h: float) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    return fig


def _save(fig: Any, path: Path) -> Path:
    """Write the PNG beside ``path`` and rename it over: a symlink planted at ``path`` is replaced, not followed."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=100, metadata={"Software": "spectrn"})
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _reservoir(kept: list[Any], seen: int, item: Any, size: int, rng: random.Random) -> None:
    """Algorithm R: after ``seen + 1`` offers, ``kept`` is a uniform random sample of at most ``size`` of them."""
    if seen < size:
        kept.append(item)
    else:
        j = rng.randrange(seen + 1)
        if j < size:
            kept[j] = item


def values_by_level(run: RunFolder, metrics_fn: MetricsFn) -> dict[str, dict[str, dict[str, list[float]]]]:
    """Per load level and variant: TTFT, TPOT, e2e and throughput of a uniform random sample of its requests, and
    the per-token ITL of a smaller one (``CDF_METHOD``): memory bounded however long the run (the summary's
    percentiles come from every request). Kept apart per level: a queue at a high load would stretch the axes of
    every lower load's distribution."""
    rng = random.Random(CDF_SAMPLE_SEED)
    per_request: dict[tuple[str, str], list[tuple[float | None, ...]]] = {}
    itl_lists: dict[tuple[str, str], list[list[float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for rec in run.records():
        rm = metrics_fn(rec) if rec.ok else None
        if rm is None:
            continue
        key = (rec.level, rec.variant)
        n = seen.get(key, 0)
        seen[key] = n + 1
        row = (rm.ttft, rm.tpot, rm.e2e, rm.throughput_tok_s)
        _reservoir(per_request.setdefault(key, []), n, row, CDF_SAMPLE_REQUESTS, rng)
        itls = [x for x in rm.itls if math.isfinite(x)]
        _reservoir(itl_lists.setdefault(key, []), n, itls, CDF_MAX_ITL_REQUESTS, rng)
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for (level, variant), rows in per_request.items():
        d = out.setdefault(level, {})[variant] = {"ttft_s": [], "tpot_s": [], "itl_s": [], "e2e_s": [], "tput": []}
        for kept in rows:
            for name, v in zip(("ttft_s", "tpot_s", "e2e_s", "tput"), kept, strict=True):
                if v is not None and math.isfinite(v):
                    d[name].append(float(v))
        for itls in itl_lists[(level, variant)]:
            d["itl_s"].extend(itls)
    return out


def at_level(level: str | None) -> str:
    """`` at load c4`` for a figure's title; empty when the run has one level and says it elsewhere."""
    return f" at load {level}" if level else ""


def plot_latency_cdfs(values: dict[str, dict[str, list[float]]], path: Path, level: str | None = None) -> Path:
    import numpy as np

    fig = _figure(11, 7.5)
    axes = fig.subplots(2, 2)
    order = sorted(values, key=lambda v: ({"baseline": 0, "speculative": 1}.get(v, 2), v))
    for ax, (key, label, scale, unit, _) in zip(axes.flat, LATENCIES, strict=True):
        for i, variant in enumerate(order):
            xs = np.sort(np.asarray(values[variant][key], dtype=float)) * scale
            if xs.size == 0:
                continue
            med = float(np.median(xs))
            ys = np.arange(1, xs.size + 1) / xs.size
            if xs.size > 4000:  # millions of ITL gaps: 4000 evenly spaced quantiles draw the same curve
                keep = np.linspace(0, xs.size - 1, 4000).astype(int)
                xs, ys = xs[keep], ys[keep]
            ax.step(xs, ys, where="post", color=color(variant, i), lw=1.8, label=f"{variant} (p50 {med:.3g} {unit})")
            ax.axvline(med, color=color(variant, i), ls=":", lw=1)
        ax.set_title(f"{label} CDF")
        ax.set_xlabel(f"{label} ({unit})")
        ax.set_ylabel("fraction of samples ≤ x")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="lower right", fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured by this load generator", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(
        f"Latency distributions{at_level(level)}, all prompt classes pooled (dotted: medians)\n{CDF_METHOD}",
        fontsize=10,
    )
    return _save(fig, path)


Series = list[tuple[str, list[float | None], list[Interval | None]]]


def _grouped_bars(ax: Any, classes: list[str], series: Series) -> None:
    import numpy as np

    x = np.arange(len(classes))
    width = 0.8 / max(1, len(series))
    for i, (variant, vals, cis) in enumerate(series):
        pos = x - 0.4 + width * (i + 0.5)
        heights = [v if v is not None else 0.0 for v in vals]
        lo = [max(0.0, v - c[0]) if v is not None and c else 0.0 for v, c in zip(vals, cis, strict=True)]
        hi = [max(0.0, c[1] - v) if v is not None and c else 0.0 for v, c in zip(vals, cis, strict=True)]
        ax.bar(pos, heights, width * 0.95, color=color(variant, i), label=variant)
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


def _scaled(ci: Interval | None, scale: float) -> Interval | None:
    return (ci[0] * scale, ci[1] * scale) if ci else None


def _series(lv: LevelSummary, pick: Any) -> tuple[list[str], Series]:
    """Bars per scope (each class, then "all (pooled)") and variant: ``pick(VariantSummary) -> (v, ci)``."""
    scopes = class_scopes(lv)
    labels = [class_label(cls) for cls, _ in scopes]
    series: Series = []
    for v in lv.variant_names():
        vals: list[float | None] = []
        cis: list[Interval | None] = []
        for _, cs in scopes:
            vs = cs.variants.get(v)
            value, ci = pick(vs) if vs is not None else (None, None)
            vals.append(value)
            cis.append(ci)
        series.append((v, vals, cis))
    return labels, series


def plot_latency_by_class(lv: LevelSummary, path: Path, level: str | None = None) -> Path:
    fig = _figure(13, 4.5)
    axes = fig.subplots(1, 3)
    for ax, (key, label, scale, unit, _) in zip(axes, LATENCIES[1:], strict=True):

        def pick(vs: VariantSummary, key: str = key, scale: float = scale) -> tuple[float | None, Interval | None]:
            st: Stats = getattr(vs, key)
            return (st.p50 * scale if st.p50 is not None else None), _scaled(st.ci95.p50 if st.ci95 else None, scale)

        labels, series = _series(lv, pick)
        _grouped_bars(ax, labels, series)
        ax.set_title(f"{label} p50 per prompt class")
        ax.set_ylabel(f"{label} ({unit})")
        _bar_legend(ax)
    fig.suptitle(f"Medians per prompt class{at_level(level)}, with 95% bootstrap confidence intervals")
    return _save(fig, path)


def plot_speedups(lv: LevelSummary, path: Path, level: str | None = None) -> Path:
    import numpy as np

    groups = [(class_label(cls), cs) for cls, cs in class_scopes(lv)]
    fig = _figure(11, 1.2 + 0.9 * len(groups))
    ax = fig.subplots(1, 1)
    keys = [k for k in SPEEDUPS if k[0] != "ttft_p50"]
    height = 0.8 / len(keys)
    y = np.arange(len(groups))
    colors = ["#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"]
    for i, (key, label) in enumerate(keys):
        vals, lo, hi = [], [], []
        for _, cs in groups:
            sp = speedup_of(cs.speedup, key)
            value = sp.value if sp is not None else None
            ci = sp.ci95 if sp is not None else None
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
    ax.set_title(f"Speedups per prompt class{at_level(level)} with 95% CIs")
    return _save(fig, path)


CLASS_COLORS = ["#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"]


def plot_acceptance(lv: LevelSummary, path: Path, level: str | None = None) -> Path:
    """Per-position acceptance for each prompt class (and pooled), and tokens per decode event."""
    import numpy as np

    fig = _figure(11, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    curves = []
    for cls, cs in class_scopes(lv):
        spec = cs.variants.get("speculative")
        acc = spec.acceptance if spec is not None else None
        if acc is not None and acc.per_position:
            curves.append((class_label(cls), acc.per_position, acc.source, acc.mean_accepted_length))
    if curves:
        width = 0.8 / len(curves)
        for i, (label, per_pos, source, length) in enumerate(curves):
            pos = np.arange(1, len(per_pos) + 1) - 0.4 + width * (i + 0.5)
            extra = f", {length:.2f} tok/step" if length is not None else ""
            # One colour per class from a palette without the variants' colours; pooled keeps speculative's.
            shade = VARIANT_COLORS["speculative"] if label.startswith("all") else CLASS_COLORS[i % len(CLASS_COLORS)]
            ax1.bar(pos, [100 * p for p in per_pos], width * 0.95, label=f"{label} ({source}{extra})", color=shade)
        ax1.set_xticks(range(1, max(len(c[1]) for c in curves) + 1))
        ax1.set_ylim(0, 110)
        ax1.legend(fontsize=7, loc="upper right")
        ax1.set_title(f"Acceptance per draft position{at_level(level)}")
    else:
        ax1.text(
            0.5, 0.5, "no acceptance: neither counters\nnor decode events to read it from", ha="center", va="center"
        )
        ax1.set_title("Acceptance per draft position")
    ax1.set_xlabel("draft position (proposal)")
    ax1.set_ylabel("P(first i proposals all accepted) (%)")
    ax1.grid(axis="y", alpha=0.3)
    labels, series = _series(lv, lambda vs: (vs.tokens_per_chunk_mean, None))
    _grouped_bars(ax2, labels, series)
    ax2.axhline(1.0, color="black", lw=0.8)
    ax2.set_title(f"Tokens per decode event{at_level(level)}\n(client side; 1 = no speculation)")
    ax2.set_ylabel("tokens per event")
    _bar_legend(ax2)
    return _save(fig, path)


def plot_throughput(lv: LevelSummary, path: Path, level: str | None = None) -> Path:
    fig = _figure(11, 4.2)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=[2, 1])

    def pick(vs: VariantSummary) -> tuple[float | None, Interval | None]:
        st = vs.output_tokens_per_s.per_request
        return st.p50, st.ci95.p50 if st.ci95 else None

    labels, series = _series(lv, pick)
    _grouped_bars(ax1, labels, series)
    ax1.set_title(f"Output tokens/s per request{at_level(level)}, p50 per prompt class (95% CI)")
    ax1.set_ylabel("tokens/s")
    _bar_legend(ax1)
    variants = lv.variant_names()
    agg_series: Series = [
        (v, [lv.variants[v].output_tokens_per_s.aggregate], [lv.variants[v].output_tokens_per_s.aggregate_ci95])
        for v in variants
    ]
    _grouped_bars(ax2, ["all classes pooled"], agg_series)
    for i, v in enumerate(variants):
        vs = lv.variants[v]
        a = vs.output_tokens_per_s.aggregate or 0.0
        cost = vs.cost.usd_per_million_output_tokens if vs.cost else None
        label = f"{a:.1f} tok/s" + (f"\n${cost:.2f}/M tok" if cost is not None else "")
        ax2.text(-0.4 + 0.8 / len(variants) * (i + 0.5), a, label, ha="center", va="bottom", fontsize=8)
    ax2.set_title(f"Aggregate output throughput{at_level(level)}\n(95% CI)")
    ax2.set_ylabel("tokens/s (all requests)")
    _bar_legend(ax2)
    return _save(fig, path)


def plot_load_levels(summary: Summary, path: Path) -> Path:
    """TPOT p50 (top row) and aggregate throughput (bottom row) per load level with 95% CIs, one column per
    prompt class and a last one for all classes pooled: a class's trend is never hidden in the pooled one."""
    scopes: list[str] = []
    for lv in summary.levels:
        scopes += [cls for cls, _ in class_scopes(lv) if cls not in scopes]
    scopes = [c for c in scopes if c != "all"] + ["all"]
    fig = _figure(max(11.0, 3.7 * len(scopes)), 6.8)
    axes = fig.subplots(2, len(scopes), squeeze=False)
    labels = summary.level_labels
    for col, scope in enumerate(scopes):
        name = class_label(scope)
        ax1, ax2 = axes[0][col], axes[1][col]
        for i, v in enumerate(summary.variant_names):
            rows: list[VariantSummary | None] = []
            for lv in summary.levels:
                cs = lv.by_prompt_class.get(scope) if scope != "all" else None
                rows.append((cs.variants if cs is not None else lv.variants if scope == "all" else {}).get(v))
            tpot = [r.tpot_s.p50 * 1e3 if r and r.tpot_s.p50 is not None else float("nan") for r in rows]
            tci = [r.tpot_s.ci95.p50 if r and r.tpot_s.ci95 and r.tpot_s.ci95.p50 else None for r in rows]
            agg = [
                r.output_tokens_per_s.aggregate if r and r.output_tokens_per_s.aggregate else float("nan") for r in rows
            ]
            aci = [r.output_tokens_per_s.aggregate_ci95 if r else None for r in rows]
            for ax, ys, cis, scale in ((ax1, tpot, tci, 1e3), (ax2, agg, aci, 1.0)):
                lo = [max(0.0, y - c[0] * scale) if c else 0.0 for y, c in zip(ys, cis, strict=True)]
                hi = [max(0.0, c[1] * scale - y) if c else 0.0 for y, c in zip(ys, cis, strict=True)]
                ax.errorbar(labels, ys, yerr=[lo, hi], fmt="o-", color=color(v, i), label=v, capsize=3)
        ax1.set_title(f"{name}: TPOT p50", fontsize=10)
        ax1.set_ylabel("TPOT p50 (ms)")
        ax2.set_title(f"{name}: aggregate output tok/s", fontsize=10)
        ax2.set_ylabel("tokens/s")
        for ax in (ax1, ax2):
            ax.set_ylim(bottom=0)
            ax.set_xlabel("load level")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("Across load levels, per prompt class (95% CIs): where speculation stops paying off")
    return _save(fig, path)


def plot_pareto(summary: Summary, path: Path) -> Path:
    """Per-instance output throughput (x) against per-user output tokens/s (y), one curve per variant across the
    load levels: the capacity / interactivity trade-off with and without speculation."""
    fig = _figure(7.5, 4.8)
    ax = fig.subplots()
    for i, v in enumerate(summary.variant_names):
        xs, ys, labels = [], [], []
        for lv in summary.levels:
            vs = lv.variants.get(v)
            if vs is None or not vs.output_tokens_per_s.aggregate or vs.output_tokens_per_s.per_request.p50 is None:
                continue
            share = vs.cost.instances_per_service if vs.cost is not None and vs.cost.instances_per_service else 1.0
            xs.append(vs.output_tokens_per_s.aggregate / share)
            ys.append(vs.output_tokens_per_s.per_request.p50)
            labels.append(lv.label)
        if not xs:
            continue
        ax.plot(xs, ys, "o-", color=color(v, i), label=v)
        for x, y, label in zip(xs, ys, labels, strict=True):
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_title("Per-instance throughput vs per-user speed, per load level (all prompt classes pooled)")
    ax.set_xlabel("output tokens/s per instance (aggregate / instances per service)")
    ax.set_ylabel("output tokens/s per user (p50 per request)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def sweep_heatmap(
    matrix: Sequence[dict[str, Any]],
    path: Path,
    *,
    title: str = "TPOT p50 speedup by draft and window",
    value_label: str = "speedup",
    recommended: Mapping[str, tuple[str, int]] | None = None,
) -> Path:
    """A window x draft heatmap per prompt class from cells ``{draft, window, prompt_class, speedup, ci95}``.

    Cells are annotated with the value and its CI; the recommended cell of each class (``recommended``: class
    -> (draft, window), the sweep's choice after its tie rule) is outlined, else the largest value; missing
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
    # room for the two-line title above the rows: with one draft the axes would otherwise collapse to nothing
    rows = math.ceil(ncls / 3)
    fig = _figure(max(5.0, 1.2 * len(windows) + 2.5) * min(ncls, 3), (1.0 * len(drafts) + 1.8) * rows + 0.8)
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
                bounds = interval_text(ci, lead="\n")
                note += "\n(no spread)" if NO_SPREAD in bounds else bounds  # a cell has room for a few words
            notes[(i, j)] = note
        ax.set_facecolor("#dddddd")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn", norm=norm, aspect="auto")
        for (i, j), note in notes.items():
            dark = abs(float(norm(grid[i, j])) - 0.5) > 0.35  # deep red or green: white text stays readable
            ax.text(j, i, note, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        chosen = (recommended or {}).get(cls)
        cell: tuple[int, int] | None = None
        if chosen is not None and chosen[0] in drafts and chosen[1] in windows:
            cell = drafts.index(chosen[0]), windows.index(chosen[1])
        elif recommended is None and np.isfinite(grid).any():
            flat = np.unravel_index(np.nanargmax(grid), grid.shape)
            cell = int(flat[0]), int(flat[1])
        if cell is not None:
            ax.add_patch(Rectangle((cell[1] - 0.5, cell[0] - 0.5), 1, 1, fill=False, ec="black", lw=2.5))
        ax.set_xticks(range(len(windows)), [str(w) for w in windows])
        ax.set_yticks(range(len(drafts)), drafts)
        ax.set_xlabel("window (num_speculative_tokens)")
        ax.set_ylabel("draft")
        ax.set_title(cls)
    for ax in axes[ncls:]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=fig.axes[:ncls], label=value_label, shrink=0.8)
    what = "recommended" if recommended is not None else "best"
    # Two lines at a size that fits the narrowest figure (one class, two windows): never cut at the edges.
    fig.suptitle(f"{title}\n(outlined: {what}; grey: not measured)", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    return _save(fig, path)
