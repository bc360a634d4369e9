"""The twin's page: ``<out>/index.html`` with its PNG plots inlined (self-contained, like a run's report).

What it shows: where the twin comes from (runs, levels, windows, time scales) and whether its timing means
anything; every fitted value with its standard error and status; the fit's residuals; acceptance per position
and class (measured, replayed, and the decay curve beyond); the prediction per window and load with intervals;
predicted against measured points; the load crossover.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spectrn.intervals import interval_text
from spectrn.report.html import html_table
from spectrn.twin.compare import Point
from spectrn.twin.model import Twin
from spectrn.twin.predict import Estimate, Prediction, speedup_curve

_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1150px;color:#222;
padding:0 1em;overflow-wrap:anywhere}.scroll{overflow-x:auto;max-width:100%}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3;overflow-wrap:normal}td.l,th.l{text-align:left}
.bad{color:#b00020;font-weight:bold}.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:.5em 1em;
margin:.3em 0}figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}.muted{color:#777;font-size:.85em}
"""
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f")


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _ci(e: Estimate | None, scale: float = 1.0, digits: int = 2) -> str:
    if e is None or e.value != e.value:
        return "n/a"
    text = f"{e.value * scale:.{digits}f}"
    if e.ci95 is not None:
        text += interval_text(e.ci95, digits, scale=scale)
    return text


def _figure(w: float, h: float, ncols: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _png(fig: Any, path: Path) -> str:
    """Write the PNG (beside, then renamed over) and return it as a data URI: the page references nothing
    outside itself."""
    import io
    import os
    import tempfile

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": "spectrn"})
    data = buf.getvalue()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def plot_residuals(twin: Twin, path: Path) -> str:
    import numpy as np

    sample = np.asarray(twin.calibration.residuals.sample, dtype=float)
    fig, (a1, a2) = _figure(10, 4, 2)
    if sample.size:
        spec = sample[:, 0] > 0
        for mask, label, color in ((~spec, "baseline", COLORS[0]), (spec, "speculative", COLORS[1])):
            a1.scatter(sample[mask, 5] * 1000, sample[mask, 4] * 1000, s=8, alpha=0.5, label=label, color=color)
            rel = (sample[mask, 4] - sample[mask, 5]) / sample[mask, 4]
            a2.scatter(sample[mask, 1], rel * 100, s=8, alpha=0.5, label=label, color=color)
        hi = float(np.nanmax(sample[:, 4:6])) * 1000
        a1.plot([0, hi], [0, hi], color="#444", lw=1)
    a1.set_xlabel("fitted step duration (ms)")
    a1.set_ylabel("observed step duration (ms)")
    a1.set_title("one point per engine step (a sample)")
    a1.legend()
    a2.axhline(0, color="#444", lw=1)
    a2.set_xlabel("sequences decoded in the step")
    a2.set_ylabel("(observed - fitted) / observed (%)")
    a2.set_title("per-step residuals include the client's read delays")
    return _png(fig, path)


def plot_acceptance(twin: Twin, path: Path, max_position: int = 16) -> str:
    import numpy as np

    cal = twin.calibration
    acc = twin.preset.acceptance
    fig, ax = _figure(8, 4.5)
    positions = np.arange(max_position)
    for i, c in enumerate(cal.acceptance):
        color = COLORS[i % len(COLORS)]
        m = np.arange(len(c.position_probs))
        ax.errorbar(m, c.position_probs, yerr=1.96 * np.asarray(c.position_se), fmt="o", color=color,
                    label=f"{c.name}: measured (95%)", capsize=3)  # fmt: skip
        curve = np.minimum(acc.accept_cap, c.alpha * np.exp(-((positions / acc.decay_tau) ** acc.decay_gamma)))
        ax.plot(positions, curve, "--", color=color, lw=1, label=f"{c.name}: decay curve (beyond the table)")
        table = next((x.position_probs for x in acc.classes if x.name == c.name), [])
        ax.plot(np.arange(len(table)), table, "-", color=color, lw=1.5, label=f"{c.name}: replayed by the twin")
    ax.set_xlabel("proposal position i")
    ax.set_ylabel("P(accept i | 0..i-1 accepted)")
    ax.set_ylim(0, 1.02)
    ax.set_title("acceptance per position and class")
    ax.legend(fontsize=8)
    return _png(fig, path)


def plot_predicted_vs_measured(points: Sequence[Point], path: Path) -> str:
    import numpy as np

    fig, ax = _figure(6.5, 5)
    tpot = [p for p in points if p.metric == "tpot_s"]
    if tpot:
        meas = np.asarray([p.measured for p in tpot]) * 1000
        pred = np.asarray([p.predicted.value for p in tpot]) * 1000
        lo = np.asarray([p.predicted.ci95[0] if p.predicted.ci95 else p.predicted.value for p in tpot]) * 1000
        hi = np.asarray([p.predicted.ci95[1] if p.predicted.ci95 else p.predicted.value for p in tpot]) * 1000
        spec = np.asarray([p.window is not None for p in tpot])
        for mask, label, color in ((~spec, "baseline", COLORS[0]), (spec, "speculative", COLORS[1])):
            ax.errorbar(meas[mask], pred[mask], yerr=[pred[mask] - lo[mask], hi[mask] - pred[mask]], fmt="o",
                        color=color, label=label, capsize=2, ms=4)  # fmt: skip
        top = float(max(meas.max(), hi.max())) * 1.05
        xs = np.asarray([0, top])
        ax.plot(xs, xs, color="#444", lw=1)
        ax.fill_between(xs, xs * 0.95, xs * 1.05, color="#999", alpha=0.2, label="within 5%")
        ax.legend()
    ax.set_xlabel("measured TPOT p50 per class (ms)")
    ax.set_ylabel("predicted TPOT p50 (ms)")
    ax.set_title("predicted against measured")
    return _png(fig, path)


def plot_crossover(twin: Twin, prediction: Prediction, path: Path) -> str:
    import numpy as np

    windows = sorted({c.window for c in prediction.cells if c.window is not None})
    top = max(2 * prediction.max_num_seqs, max(c.concurrency for c in prediction.cells), 64)
    batches = sorted({int(b) for b in np.unique(np.geomspace(1, top, 80).astype(int))})
    fig, ax = _figure(8, 4.5)
    for i, w in enumerate(windows):
        color = COLORS[i % len(COLORS)]
        ax.plot(batches, speedup_curve(twin, w, batches, prediction.mix), color=color, lw=1.2,
                label=f"window {w} (steady state)")  # fmt: skip
        cells = [c for c in prediction.cells if c.window == w and "mix" in c.speedup_tpot]
        xs = [min(c.concurrency, prediction.max_num_seqs) for c in cells]
        ys = [c.speedup_tpot["mix"].value for c in cells]
        err = [
            [c.speedup_tpot["mix"].value - (c.speedup_tpot["mix"].ci95 or (0, 0))[0] for c in cells],
            [(c.speedup_tpot["mix"].ci95 or (0, 0))[1] - c.speedup_tpot["mix"].value for c in cells],
        ]
        ax.errorbar(xs, ys, yerr=err, fmt="o", color=color, capsize=2, ms=4)
    ax.axhline(1.0, color="#444", lw=1)
    ax.axvline(prediction.max_num_seqs, color="#999", ls=":", lw=1, label=f"batch limit {prediction.max_num_seqs}")
    ax.set_xscale("log")
    ax.set_xlabel("sequences decoding together (concurrency up to the batch limit)")
    ax.set_ylabel("TPOT speedup of the mix (baseline / speculative)")
    ax.set_title("where speculation stops paying (points: engine at the predicted levels, 95%)")
    ax.legend(fontsize=8)
    return _png(fig, path)


def _fmt(v: float | None) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def write_twin_report(
    twin: Twin, prediction: Prediction, points: Sequence[Point], out: Path, *, skipped: Sequence[str] = ()
) -> Path:
    """Write ``out/index.html`` and its PNGs; return the page's path. ``skipped``: measured runs left out of the
    comparison, with the reason (another draft than the twin's)."""
    out.mkdir(parents=True, exist_ok=True)
    cal = twin.calibration
    figs = {
        "residuals": plot_residuals(twin, out / "residuals.png"),
        "acceptance": plot_acceptance(twin, out / "acceptance.png"),
        "crossover": plot_crossover(twin, prediction, out / "crossover.png"),
    }
    if points:
        figs["compare"] = plot_predicted_vs_measured(points, out / "predicted_vs_measured.png")
    parts = [f"<h1>Digital twin {_e(twin.preset.name)}</h1>"]
    if not cal.performance:
        parts.append(
            '<p class="warn bad">NOT A PERFORMANCE RESULT: the twin was fitted to runs whose timing means nothing ('
            + _e("; ".join(cal.reasons))
            + "). It checks the method, not a server.</p>"
        )
    parts.append(
        f"<p>Draft {_e(cal.draft)}, {_e(cal.semantics)} window semantics, server profile {_e(twin.preset.profile)}, "
        f"batch limit {twin.preset.max_num_seqs}. Serve it with <code>spectrn sim serve --preset-file</code>.</p>"
    )
    parts.append("<h2>Source runs</h2>")
    parts.append(
        html_table(
            ["run", "runtime", "profile", "time scale", "window", "levels", "usable steps", "dropped"],
            [
                [r.run_id, r.runtime, r.profile or "", f"{r.time_scale:g}", str(r.window), ", ".join(r.levels),
                 ", ".join(f"{k} {v}" for k, v in r.steps.items()),
                 "; ".join(f"{v}: " + ", ".join(f"{why} {n}" for why, n in d.items()) for v, d in r.dropped.items())]
                for r in cal.runs
            ],
        )
    )  # fmt: skip
    parts.append("<h2>Fitted step costs (real seconds)</h2>")
    parts.append(
        html_table(
            ["parameter", "value", "standard error", "status", "steps", "note"],
            [[k, _fmt(p.value), _fmt(p.se), p.status, str(p.points), p.note or ""] for k, p in cal.costs.items()],
        )
    )
    r = cal.residuals
    parts.append(
        f"<p>{cal.regime.steps} steps in {cal.regime.segments} segments, {cal.regime.compute_bound_steps} compute "
        f"bound. |observed - fitted| / observed per step: median {r.step_median_abs_rel:.1%}, 90th percentile "
        f"{r.step_p90_abs_rel:.1%} (client read delays included); per segment: median "
        f"{r.segment_median_abs_rel:.1%}, 90th percentile {r.segment_p90_abs_rel:.1%}.</p>"
    )
    parts.append(
        f'<figure><img src="{figs["residuals"]}" alt="residuals"><figcaption>Fit residuals.</figcaption></figure>'
    )
    parts.append(
        html_table(
            ["run", "variant", "level", "steps", "median residual", "p90 |residual|"],
            [
                [g.run, g.variant, g.level, str(g.steps), f"{g.median_rel:+.1%}", f"{g.p90_abs_rel:.1%}"]
                for g in r.groups
            ],
        )
    )
    parts.append("<h2>Acceptance per position and prompt class</h2>")
    parts.append(
        html_table(
            ["class", "share", "alpha", "mean accepted length", "window", "conditional acceptance per position"],
            [[c.name, f"{c.share:.2f}", f"{c.alpha:.3f}", _fmt(c.mean_accepted_length), str(c.window),
              ", ".join(f"{p:.3f}±{s:.3f}" for p, s in zip(c.position_probs, c.position_se, strict=True))]
             for c in cal.acceptance],
        )
    )  # fmt: skip
    d = cal.decay
    parts.append(
        f"<p>Decay beyond the measured positions: tau {d.tau:.3g}, gamma {d.gamma:.3g} "
        f"({'fitted' if d.identified else _e(d.note or 'prior')}).</p>"
    )
    parts.append(
        f'<figure><img src="{figs["acceptance"]}" alt="acceptance"><figcaption>Acceptance.</figcaption></figure>'
    )
    parts.append("<h2>Prediction</h2>")
    parts.append(f'<p class="muted">{_e(prediction.method)}</p>')
    rows = []
    for c in prediction.cells:
        rows.append(
            [str(c.concurrency), "baseline" if c.window is None else str(c.window), _ci(c.tpot_s["mix"], 1000, 1),
             _ci(c.speedup_tpot.get("mix")) if c.window is not None else "", _ci(c.e2e_s),
             _ci(c.throughput_tok_s, 1, 0), _ci(c.usd_per_million_tokens), ", ".join(c.extrapolated)]
        )  # fmt: skip
    parts.append(
        html_table(
            [
                "concurrency",
                "window",
                "TPOT mix (ms)",
                "speedup",
                "e2e p50 (s)",
                "tokens/s",
                "$/M tokens",
                "extrapolated",
            ],
            rows,
            left=2,
        )  # fmt: skip
    )
    best = [
        [f"c{b.concurrency}", "none pays" if b.window is None else str(b.window), _ci(b.speedup),
         "" if b.probability_best is None else f"{b.probability_best:.0%}"]
        for b in prediction.best
    ]  # fmt: skip
    parts.append(html_table(["level", "best window", "speedup", "fastest in draws"], best))
    cross = [
        [str(x.window), x.note, interval_text(x.ci95, 0, lead=""), y.note, interval_text(y.ci95, 0, lead="")]
        for x, y in zip(prediction.crossover, prediction.crossover_unlimited, strict=True)
    ]  # fmt: skip
    parts.append(html_table(["window", "within the batch limit", "95%", "without the batch limit", "95%"], cross))
    parts.append(f'<figure><img src="{figs["crossover"]}" alt="crossover"><figcaption>Crossover.</figcaption></figure>')
    parts.append("<h2>Predicted against measured</h2>")
    if skipped:
        parts.append("<p><b>Not compared</b> (another draft than the twin's):</p><ul>")
        parts += [f"<li>{_e(s)}</li>" for s in skipped]
        parts.append("</ul>")
    if points:
        parts.append(
            html_table(
                ["run", "window", "concurrency", "scope", "metric", "measured", "predicted [95%]", "error"],
                [[p.run, "baseline" if p.window is None else str(p.window), str(p.concurrency), p.scope, p.metric,
                  _fmt(p.measured), _ci(p.predicted, 1, 4), f"{p.error:+.1%}"] for p in points],
            )
        )  # fmt: skip
        parts.append(f'<figure><img src="{figs["compare"]}" alt="compare"><figcaption>Each point: one class at one '
                     "load and window.</figcaption></figure>")  # fmt: skip
    else:
        parts.append("<p>No measured run was given (<code>--measured</code>).</p>")
    if cal.notes or prediction.notes:
        parts.append(
            "<h2>Notes</h2><ul>"
            + "".join(f"<li>{_e(n)}</li>" for n in dict.fromkeys([*cal.notes, *prediction.notes]))
            + "</ul>"
        )
    head = f"<meta charset='utf-8'><title>twin {_e(twin.preset.name)}</title><style>{_CSS}</style>"
    page = f"<!doctype html><html><head>{head}</head><body>{''.join(parts)}</body></html>"
    from spectrn.paths import atomic_write_text

    path = out / "index.html"
    atomic_write_text(path, page)
    return path
