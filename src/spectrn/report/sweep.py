"""Sweep output: the matrix and prediction tables (as rows, for the terminal and Markdown), Markdown, the
crossover plot and the HTML report. The terminal view is ``spectrn.cli.show.print_sweep_analysis``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spectrn.intervals import interval_text
from spectrn.labels import setup_label, window_label
from spectrn.paths import atomic_write_text
from spectrn.run.sweep_analysis import SweepAnalysis, SweepPrediction
from spectrn.sweep.recommend import ALL, MIX


def _fx(v: Any, ci: Any = None) -> str:
    if not isinstance(v, int | float):
        return "n/a"
    text = f"{v:.2f}x"
    if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci:
        text += interval_text(ci)
    return text


def _ms(v: Any) -> str:
    return f"{v * 1e3:.2f}" if isinstance(v, int | float) else "n/a"


def shown_scopes(analysis: SweepAnalysis) -> list[str]:
    """Prompt classes and the mix; ``all`` only when there is a single class (pooling classes of different
    acceptance gives a median that describes no real workload)."""
    classes = list(analysis.classes)
    has_mix = any(r.prompt_class == MIX for r in analysis.rows)
    if len(classes) > 1:
        return [*classes, *([MIX] if has_mix else [])]
    return classes or [ALL]


def matrix_table(analysis: SweepAnalysis, level: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per (draft, window), one column per prompt class (TPOT p50 speedup + CI)."""
    from spectrn.sweep.recommend import draft_size

    scopes = shown_scopes(analysis)
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for r in analysis.rows:
        if r.level == level:
            cells.setdefault((r.draft, r.window), {})[r.prompt_class] = _fx(r.speedup, r.ci95)
    header = ["draft", "window", *scopes]
    rows = [
        [d, str(w), *(cells[(d, w)].get(s, "-") for s in scopes)]
        for d, w in sorted(cells, key=lambda dw: (draft_size(dw[0]), dw[1]))
    ]
    return header, rows


def prediction_rows(pred: SweepPrediction) -> list[list[str]]:
    rows = []
    for r in pred.comparison:
        err = r.error
        rows.append(
            [r.draft, r.prompt_class, str(r.window), _ms(r.predicted_s), _ms(r.measured_s),
             f"{err:+.1%}" if isinstance(err, int | float) else "n/a",
             "fitted point" if r.fitted else f"predicted from {window_label(r.from_window)}"]
        )  # fmt: skip
    return rows


def refined_lines(pred: SweepPrediction) -> list[str]:
    out = []
    for draft, d in sorted(pred.drafts.items()):
        r = d.refined
        if r:
            out.append(
                f"{draft}: with windows {', '.join(map(str, r.windows_in_fit))} and the baseline in the cost model, "
                f"the predicted optimum is window {r.best_window} (from the large-window run alone: "
                f"{d.best_window})"
            )
    return out


PRED_HEADER = ["draft", "class", "window", "predicted TPOT ms", "measured TPOT p50 ms", "error", "basis"]


def _md_cell(text: str) -> str:
    """A table cell as Markdown data: no column break, no emphasis or code from the text itself."""
    return "".join("\\" + ch if ch in "\\|*_`" else ch for ch in text)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def objective_lines(analysis: SweepAnalysis) -> list[str]:
    """The decision by the sweep's objective: a title naming it, then its rule and one line per recommendation
    (``spectrn.sweep.objective``); [] for an analysis written before objectives existed."""
    obj = analysis.objective
    if not obj:
        return []
    name = {"cost": "$/M output tokens at the SLO", "capacity": "capacity at the SLO", "tpot": "TPOT p50 speedup",
            "e2e": f"e2e {obj.percentile}"}.get(obj.name, obj.name)  # fmt: skip
    lines = [f"Decision by {name} (objective {obj.name}, {obj.chosen_by})", f"rule: {obj.rule}"]
    lines += [r.text for r in obj.recommendations]
    if obj.overall:
        lines.append(f"overall: {obj.overall}")
    return lines


def sweep_markdown(analysis: SweepAnalysis, artifacts: dict[str, str] | None = None) -> str:
    s = analysis.settings
    lines = [
        f"# spectrn sweep {analysis.sweep_id}",
        "",
        f"Target {s.target}; drafts {', '.join(s.drafts)}; windows "
        f"{', '.join(map(str, s.windows))}; load {', '.join(s.levels)}; prompts "
        f"{s.prompts}; {s.requests} requests x {s.max_tokens} tokens per endpoint and cell.",
        "",
        *(f"Timing: {note}." for note in analysis.timing),
        "",
    ]
    eq = analysis.equivalence
    if eq.compared:
        if eq.matched == eq.compared:
            lines += [f"**Output equivalence: {eq.matched}/{eq.compared} greedy outputs identical (100%).**", ""]
        else:
            lines += [
                f"**OUTPUT DIVERGENCE: {eq.compared - eq.matched} of {eq.compared} greedy outputs differ "
                f"({eq.match_rate or 0.0:.1%} match).**",
                "",
                _md_table(
                    ["draft", "window", "level", "prompt", "first divergent token"],
                    [
                        [d.draft, str(d.window), d.level, d.prompt_id, str(d.first_divergence)]
                        for d in eq.divergences[:50]
                    ],
                ),  # fmt: skip
                "",
            ]
    for level in analysis.levels:
        header, rows = matrix_table(analysis, level)
        lines += [f"## TPOT p50 speedup at {level} (95% CI)", "", _md_table(header, rows), ""]
    decision = objective_lines(analysis)
    if decision:
        lines += [f"## {_md_cell(decision[0])}", "", *(f"- {_md_cell(x)}" for x in decision[1:]), ""]
    lines += ["## Recommendations", "", "By TPOT p50 speedup (baseline / speculative), per prompt class and mix:", ""]
    lines += [f"- {r.text}" for r in analysis.recommendations]
    w = analysis.mix_weights
    if w:
        lines += ["", "Mix weights: " + ", ".join(f"{c}={x:.2f}" for c, x in w.items())]
    lines += [
        "",
        "Ties: configurations whose CI overlaps the best's; the cheapest (smallest window, then smallest draft) "
        f"is recommended. A gain is meaningful when its CI is above 1 and it is at least "
        f"{1 + analysis.min_gain:.2f}x.",
        "",
    ]
    if analysis.crossovers:
        lines += ["## Load crossover", ""] + [f"- {c.text}" for c in analysis.crossovers] + [""]
    expl = analysis.explanations
    lines += ["## Why: acceptance and step costs", ""]
    for f in expl.cost_fits:
        if f.draft_s is not None:
            ratio = f.draft_to_target
            lines.append(
                f"- cost model {f.draft} @ {f.level}: step(k) = {_ms(f.intercept_s)} ms + k x "
                f"{_ms(f.draft_s)} ms"
                + (f"; one window token (draft pass + verify growth) = {ratio:.3f} target steps" if ratio else "")
            )
    rows = [
        [e.draft, str(e.window), e.level, e.prompt_class,
         f"{e.observed_length:.2f}" if e.observed_length is not None else "n/a",
         f"{e.first_position:.2f}" if e.first_position is not None else "n/a",
         f"{e.expected_length_first_position:.2f}" if e.expected_length_first_position is not None else "n/a",
         f"{e.acceptance_rate:.2f}" if e.acceptance_rate is not None else "n/a",
         "; ".join(e.disagreements) or "agrees"]
        for e in expl.cells
    ]  # fmt: skip
    lines += [
        "",
        _md_table(
            [
                "draft",
                "k",
                "level",
                "class",
                "observed L",
                "a (pos. 0)",
                "(1-a^(k+1))/(1-a)",
                "accepted/drafted",
                "disagreement",
            ],
            rows,
        ),  # fmt: skip
        "",
    ]
    pred = analysis.prediction
    if pred.comparison:
        lines += ["## Prediction vs measurement", "", _md_table(PRED_HEADER, prediction_rows(pred)), ""]
        if pred.choice:
            ch = pred.choice
            lines += [f"Predicted optimum: {ch.draft} window {ch.window}.", ""]
        lines += [*(f"- {line}" for line in refined_lines(pred)), ""]
    if artifacts:
        lines += ["## Compiled artifacts", ""] + [f"- {k}: {v}" for k, v in artifacts.items()] + [""]
    return "\n".join(lines)


def plot_crossover(analysis: SweepAnalysis, path: Path) -> Path | None:
    """Speedup vs load level, one panel per prompt class (and the mix), one line per (draft, window) with its
    95% CI band; None with a single load level."""
    from matplotlib.figure import Figure

    levels = analysis.levels
    series = analysis.crossovers
    scopes = list(dict.fromkeys(c.scope for c in series))
    if len(levels) < 2 or not scopes:
        return None
    fig = Figure(figsize=(5.0 * len(scopes), 4.5), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(scopes), squeeze=False)[0]
    xs = {lv: i for i, lv in enumerate(levels)}
    for ax, scope in zip(axes, scopes, strict=True):
        for c in (c for c in series if c.scope == scope):
            pts = [(xs[p.level], p.speedup, p.ci95) for p in c.levels if p.speedup is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1] for p in pts]
            line = ax.plot(x, y, marker="o", label=setup_label(c.draft, c.window))[0]
            lo = [p[2][0] if p[2] else p[1] for p in pts]
            hi = [p[2][1] if p[2] else p[1] for p in pts]
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
            if c.crossover and c.pays_at_lowest:
                ax.axvline(xs[c.crossover], color=line.get_color(), ls=":", lw=1)
        ax.axhline(1.0, color="black", lw=1, ls="--")
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlabel("load level")
        ax.set_title(scope)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("TPOT p50 speedup (>1: speculation faster)")
    fig.suptitle("speculation vs load (band: 95% CI; dotted: where a configuration stops paying)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100, metadata={"Software": "spectrn"})
    return path


def recommended_cells(analysis: SweepAnalysis, level: str) -> dict[str, tuple[str, int]]:
    """The sweep's recommendation per prompt class (and the mix) at ``level``: class -> (draft, window). A class
    whose best configuration does not pay has no entry (serve it without speculation)."""
    out: dict[str, tuple[str, int]] = {}
    for r in analysis.recommendations:
        if r.level == level and r.chosen:
            out[r.scope] = (r.chosen.draft, r.chosen.window)
    return out


def write_report(sweep_dir: Path, analysis: SweepAnalysis, artifacts: dict[str, str] | None = None) -> Path:
    """``report/index.html`` (self-contained: PNGs inlined as base64) and ``sweep.md``."""
    import base64
    import html

    report_dir = sweep_dir / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    md = sweep_markdown(analysis, artifacts)
    atomic_write_text(sweep_dir / "sweep.md", md)
    images: list[tuple[str, Path, str]] = []
    try:
        from spectrn.report.plots import sweep_heatmap
    except ImportError:  # the report module is optional for sweeps; the tables carry the same numbers
        sweep_heatmap = None  # type: ignore[assignment]
    scopes = shown_scopes(analysis)
    for level in analysis.levels:
        cells = [
            {"draft": r.draft, "window": r.window, "prompt_class": r.prompt_class, "speedup": r.speedup,
             "ci95": list(r.ci95) if r.ci95 else None}
            for r in analysis.rows
            if r.level == level and r.speedup is not None and r.prompt_class in scopes
        ]  # fmt: skip
        if cells and sweep_heatmap is not None:
            p = sweep_heatmap(
                cells,
                report_dir / f"heatmap-{level}.png",
                title=f"TPOT p50 speedup by draft and window at {level}",
                recommended=recommended_cells(analysis, level),
            )
            images.append(
                (
                    f"Speedup heatmap at load {level}",
                    p,
                    f"TPOT p50 speedup (baseline / speculative) of every draft and window measured at load {level}, "
                    "one panel per prompt class shown, with 95% CIs; outlined: the recommended cell, grey: not "
                    "measured.",
                )
            )
    cross = plot_crossover(analysis, report_dir / "crossover.png")
    if cross is not None:
        images.append(
            ("Speedup vs load", cross, "TPOT p50 speedup of each draft and window across the load levels (95% CIs).")
        )
    figs = "".join(
        f'<figure><img alt="{html.escape(t)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption><b>{html.escape(t)}.</b> {html.escape(c)}'
        "</figcaption></figure>"
        for t, p, c in images
    )
    eq = analysis.equivalence
    banner = ""
    if eq.compared and eq.matched != eq.compared:
        banner = (
            f'<div class="bad">OUTPUT DIVERGENCE: {eq.compared - eq.matched} of {eq.compared} greedy '
            "outputs differ between baseline and speculative. See the table below.</div>"
        )
    elif eq.compared:
        banner = f'<div class="ok">Output equivalence: {eq.matched}/{eq.compared} greedy outputs identical.</div>'
    body = _markdown_to_html(md)
    # The page title (sweep.md's first heading) comes first; the verdict on equivalence and the plots follow it.
    head, sep, rest = body.partition("</h1>")
    if not sep:
        head, rest = "", body
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>spectrn sweep {html.escape(analysis.sweep_id)}</title><style>{_CSS}</style></head><body>"
        f"{head}{sep}{banner}{figs}{rest}</body></html>"
    )
    out = report_dir / "index.html"
    atomic_write_text(out, page)
    return out


_CSS = (
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1150px;color:#222;"
    "padding:0 1em}table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;"
    "padding:.25em .6em;text-align:left}th{background:#f3f3f3}.ok{color:#17803d;font-weight:bold;padding:.5em 0}"
    ".bad{background:#fde8e8;border-left:6px solid #b00020;color:#b00020;font-weight:bold;padding:.8em 1em;"
    "font-size:1.2em}figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee;box-sizing:border-box}"
    "figcaption{color:#555;font-size:.9em}"
)


def _markdown_to_html(md: str) -> str:
    """``sweep.md`` as HTML (CommonMark and tables, by markdown-it-py). Raw HTML is shown as text, and links,
    images and autolinks stay plain text: the page references nothing outside itself."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["image", "link", "autolink"])
    return str(parser.render(md))
