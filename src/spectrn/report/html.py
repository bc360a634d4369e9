"""report/index.html: a self-contained page with the tables, the plots inlined and the run's provenance."""

from __future__ import annotations

import base64
import html
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.analyze.metric_table import displayed
from spectrn.analyze.run import ensure_summary
from spectrn.errors import PublishError
from spectrn.intervals import interval_text
from spectrn.labels import class_label, utc_text
from spectrn.publish.datums import MetricsFn, default_metrics_fn
from spectrn.report.batch_limit import batch_limit_lines
from spectrn.report.format import (
    GOODPUT_DEFINITION,
    class_scopes,
    correctness_lines,
    headline_lines,
    metric_speedup,
    metric_text,
    models_shown,
    not_performance_banner,
    num,
    output_lengths_text,
    price_line,
    provenance_line,
    slo_table,
    speedup_of,
    usd,
    verdict_line,
)
from spectrn.report.markdown import summary_markdown
from spectrn.report.plots import (
    CDF_METHOD,
    plot_acceptance,
    plot_latency_by_class,
    plot_latency_cdfs,
    plot_load_levels,
    plot_pareto,
    plot_speedups,
    plot_throughput,
    values_by_level,
)
from spectrn.run.folder import EMF, REPORT, RunFolder
from spectrn.run.measured import measured, scheduling_text
from spectrn.run.summary import LevelSummary, Summary

if TYPE_CHECKING:
    pass


_CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1150px;color:#222;
padding:0 1em;overflow-wrap:break-word}.scroll{overflow-x:auto;max-width:100%}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f7f7f7;padding:.6em;font-size:.85em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}
.ok{color:#17803d;font-weight:bold}.bad{color:#b00020;font-weight:bold}.warn{background:#fff4e5;
border-left:4px solid #f0a020;padding:.5em 1em;margin:.3em 0}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{color:#555;font-size:.9em}
.muted{color:#777;font-size:.85em}code{background:#f5f5f5;padding:0 .2em}
.banner{background:#b00020;color:#fff;font-weight:bold;font-size:1.3em;padding:.7em 1em;margin:.6em 0}
"""


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _display_url(url: str) -> str:
    # Shown as text, never as a link: the report must not reference anything outside itself.
    return re.sub(r"\b[A-Za-z][A-Za-z0-9+.-]*://", "", url)


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A table of escaped text in a sideways-scrolling box; the first ``left`` columns left-aligned."""
    th = "".join(f'<th class="{"l" if i < left else ""}">{_e(h)}</th>' for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f'<td class="{"l" if i < left else ""}">{_e(c)}</td>' for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _comparison_rows(lv: LevelSummary) -> list[list[str]]:
    rows = []
    for cls, cs in class_scopes(lv):
        label = class_label(cls)
        b, s = cs.variants.get("baseline"), cs.variants.get("speculative")
        for m in displayed("html"):
            if m.display is None:
                continue
            rows.append(
                [label, m.display.header()]
                + [metric_text(b, m, q) for q in ("p50", "p90", "p99")]
                + [metric_text(s, m, q) for q in ("p50", "p90", "p99")]
                + [metric_speedup(cs.speedup, m)]
            )
    return rows


def _variant_rows(lv: LevelSummary) -> list[list[str]]:
    rows = []
    for cls, cs in class_scopes(lv):
        for v in lv.variant_names():
            vs = cs.variants.get(v)
            if vs is None:
                continue
            rq, acc, cost = vs.requests, vs.acceptance, vs.cost
            agg = vs.output_tokens_per_s
            ci = agg.aggregate_ci95
            cost_ci = cost.usd_per_million_output_tokens_ci95 if cost else None
            rows.append(
                [
                    class_label(cls),
                    v,
                    str(rq.completed) + (f" of {rq.planned}" if rq.planned is not None else ""),
                    str(rq.errors),
                    ", ".join(f"{k}: {n}" for k, n in rq.error_classes.items()) or "-",
                    num(vs.tokens_per_chunk_mean, 1.0, 2),
                    f"{100 * acc.rate:.1f}%" if acc is not None and acc.rate is not None else "-",
                    num(acc.mean_accepted_length, 1.0, 2) if acc is not None else "-",
                    acc.source or "-" if acc is not None else "-",
                    num(agg.aggregate) + interval_text(ci, 1),
                    (usd(cost.usd_per_million_output_tokens) if cost else "n/a") + interval_text(cost_ci),
                ]
            )
    return rows


def _origin(source: str, configured: object, used: object) -> str:
    """Where a configuration row's value came from, and the config's value when the server's differs."""
    if source == "server":
        return " (from the server" + (f"; the config says {configured})" if configured != used else ")")
    if source == "unknown":
        return f" (the server did not say; the config says {configured})"
    return ""


def report_html(folder: RunFolder, summary: Summary, images: list[tuple[str, Path, str]], markdown: str) -> str:
    """The whole report as one HTML string (images inlined; every text from the run escaped)."""
    from spectrn import __version__

    cfg = folder.meta.config
    good = summary.clean and summary.verdict.performance
    started = summary.provenance.started_by_spectrn
    performance = summary.verdict.performance
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>spectrn report {_e(summary.run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>spectrn run {_e(summary.run_id)}</h1>",
    ]
    if not performance:
        parts.append(f'<div class="banner">{_e(not_performance_banner(summary))}</div>')
    parts += [
        f'<p class="muted">{_e(provenance_line(summary))}</p>',
        f'<p class="{"ok" if good else "bad"}">{_e(verdict_line(summary))}</p>',
    ]
    for w in summary.warnings():
        parts.append(f'<div class="warn">{_e(w)}</div>')
    for line in batch_limit_lines(summary, cfg.max_num_seqs):
        parts.append(f'<div class="warn">{_e(line)}</div>')
    heads = headline_lines(summary)
    if not performance:
        parts.append("<h2>Headline: correctness (timings below are not performance figures)</h2><ul>")
        parts += [f"<li><b>{_e(line)}</b></li>" for line in correctness_lines(summary)]
        parts.append("</ul>")
    elif heads:
        parts.append("<h2>Headline per prompt class: TPOT speedup and cost</h2><ul>")
        parts += [f"<li><b>{_e(h)}</b></li>" for h in heads]
        parts.append(
            '</ul><p class="muted">baseline / speculative, paired by request, 95% bootstrap CI; cost per million '
            "output tokens without and with speculation. Prompt classes are reported apart: a median pooled over "
            "classes is not a headline.</p>"
        )
    parts.append("<h2>Configuration and provenance</h2>")
    servers = summary.provenance.servers
    m = measured(cfg, summary.provenance)  # the servers' own draft and window where spectrn learnt them
    target, draft = models_shown(summary, cfg.target, m.draft or "unknown")
    conf_rows = [
        ["target", target],
        ["draft", draft + _origin(m.draft_from, cfg.draft, m.draft)],
        ["window (num_speculative_tokens)", str(m.window if m.window is not None else "unknown")
         + _origin(m.window_from, cfg.num_speculative_tokens, m.window)],
        ["speculation mode", cfg.speculation_mode],
        ["vLLM dialect", cfg.vllm_dialect],
        ["instance", f"{cfg.instance_type} TP{cfg.tensor_parallel_size}"],
        ["max-num-seqs / max-model-len", f"{cfg.max_num_seqs} / {cfg.max_model_len}"],
        ["prompts", cfg.bench.prompts],
        ["load", ", ".join(summary.level_labels) or "?"],
        ["requests per endpoint", str(cfg.bench.requests)],
        ["max_tokens / temperature", f"{cfg.bench.max_tokens} / {cfg.bench.temperature}"],
        ["output lengths", output_lengths_text(folder.meta.ignore_eos)],
        ["runtime", summary.provenance.runtime + (" (started by spectrn)" if started else "")],
        ["time scale", f"{summary.provenance.time_scale:g}" + (" (rescaled)" if summary.provenance.rescaled else "")],
    ]  # fmt: skip
    scheduling = scheduling_text(summary.provenance)
    if scheduling:
        conf_rows.append(["scheduling", scheduling])
    for variant, url in sorted(folder.meta.endpoints.items()):
        ident = servers.get(variant)
        extra = ""
        if ident is not None:
            bits = [x for x in (ident.model, ident.version and f"vLLM {ident.version}", ident.profile) if x]
            if ident.draft or ident.window:
                bits.append(f"draft {ident.draft or '?'} window {ident.window or '?'} ({ident.source})")
            extra = f" ({', '.join(bits)})" if bits else ""
        conf_rows.append([f"endpoint {variant}", _display_url(url) + extra])
    if summary.time_range:
        conf_rows.append(["time (UTC)", f"{_utc(summary.time_range[0])} to {_utc(summary.time_range[1])}"])
    conf_rows += _publish_rows(folder.path)
    parts.append(html_table(["setting", "value"], conf_rows, left=2))
    for lv in summary.levels:
        title = "Comparison" + (f" at load {lv.label}" if len(summary.levels) > 1 else "")
        parts.append(f"<h2>{_e(title)}</h2>")
        parts.append(
            html_table(
                ["prompt class", "metric", "base p50", "base p90", "base p99", "spec p50", "spec p90", "spec p99",
                 "speedup [95% CI]"],
                _comparison_rows(lv),
                left=2,
            )
        )  # fmt: skip
        parts.append(
            html_table(
                ["prompt class", "variant", "completed", "errors", "error classes", "tokens/event", "acceptance",
                 "mean accepted length", "acceptance from", "aggregate tok/s [95% CI]", "$/M output tokens [95% CI]"],
                _variant_rows(lv),
                left=2,
            )
        )  # fmt: skip
        price = price_line(summary)
        if price is not None:
            parts.append(f'<p class="muted">{_e(price)}</p>')
        slos = slo_table(lv)
        if slos is not None:
            parts.append("<h3>SLOs and goodput</h3>")
            parts.append(html_table(*slos, left=2))
            parts.append(f'<p class="muted">{_e(GOODPUT_DEFINITION)}.</p>')
        for note in tpot_itl_notes(lv):
            parts.append(f'<p class="muted">{_e(note)}</p>')
        eq = lv.equivalence
        if eq is not None and eq.compared:
            same = eq.matched == eq.compared
            at = f" at load {lv.label}" if len(summary.levels) > 1 else ""
            parts.append(
                f'<p class="{"ok" if same else "bad"}">output equivalence{_e(at)}: {eq.matched}/{eq.compared} '
                f"greedy outputs identical ({_e(eq.basis)})</p>"
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


def level_images(
    summary: Summary, values: dict[str, dict[str, dict[str, list[float]]]], out: Path
) -> list[tuple[str, Path, str]]:
    """Every per-level plot, for every load level (the level in the title, the caption and the file name when
    the run has several), in load order."""
    several = len(summary.levels) > 1
    images: list[tuple[str, Path, str]] = []
    for lv in summary.levels:
        level = lv.label if several else None
        at = f" at load {lv.label}" if several else ""
        stem = f"-{re.sub(r'[^A-Za-z0-9_.-]', '_', lv.label)}" if several else ""
        level_values = values.get(lv.label, {})
        if level_values:
            images.append(
                (
                    f"Latency CDFs{at}, all prompt classes pooled",
                    plot_latency_cdfs(level_values, out / f"latency_cdf{stem}.png", level),
                    f"Empirical CDFs per variant over the measured requests{at}, every prompt class together, from a "
                    f"{CDF_METHOD}; further left is faster.",
                )
            )
        images += [
            (
                f"Latency per prompt class{at}",
                plot_latency_by_class(lv, out / f"latency_by_class{stem}.png", level),
                f"p50 per prompt class{at}, then all classes pooled, with 95% bootstrap confidence intervals "
                "(whiskers).",
            ),
            (
                f"Speedups per prompt class{at}",
                plot_speedups(lv, out / f"speedup{stem}.png", level),
                f"Paired speedups per prompt class{at}, then all classes pooled, with 95% CIs; a whisker crossing "
                "1.0 means no significant difference.",
            ),
            (
                f"Acceptance per prompt class{at}",
                plot_acceptance(lv, out / f"acceptance{stem}.png", level),
                f"Acceptance per draft position for each prompt class{at} (server counters where they moved, else "
                "decode event sizes), and client-side tokens per decode event.",
            ),
            (
                f"Throughput per prompt class{at}",
                plot_throughput(lv, out / f"throughput{stem}.png", level),
                f"Per-request output tokens/s per prompt class{at}, and aggregate throughput of all classes pooled "
                "with cost per million tokens (95% CIs).",
            ),
        ]
    return images


def tpot_itl_notes(lv: LevelSummary) -> list[str]:
    """Why a class's TPOT and per-token ITL speedups point different ways, for each class where they do."""
    out = []
    for cls, cs in class_scopes(lv):
        tpot, itl = speedup_of(cs.speedup, "tpot_p50"), speedup_of(cs.speedup, "itl_p50")
        if tpot is None or itl is None or tpot.value is None or itl.value is None:
            continue
        if (tpot.value - 1.0) * (itl.value - 1.0) >= 0:
            continue
        scope = "all classes pooled" if cls == "all" else cls
        out.append(f"{scope}: TPOT {tpot.value:.2f}x but per-token ITL {itl.value:.2f}x. {TPOT_VS_ITL}")
    return out


TPOT_VS_ITL = (
    "Both come from the same gaps between streamed events. Within one request, TPOT = (e2e − TTFT) / (tokens − 1) "
    "is the mean of its per-token ITL samples (each gap g that carried k tokens counted as k samples of g/k), and "
    "the TPOT figure is the median request's mean; the per-token ITL figure is the median over all tokens. A mean "
    "pays for every long gap: a step whose draft proposals were all rejected (one token for the cost of a draft "
    "and a verify step) and a step stretched by other requests' prefill in the same batch; the median token lies "
    "among the short gaps of accepted runs. So speculation can shorten the typical gap (ITL) while the average "
    "time per token (TPOT) grows."
)


def _publish_rows(run_dir: Path) -> list[list[str]]:
    """Where the run's metrics went: the EMF file and each CloudWatch target in publish.json."""
    rows = []
    if (run_dir / EMF).exists():
        rows.append(["EMF metrics", EMF])
    try:
        targets = RunFolder(run_dir).publish_ledger().targets
    except PublishError:  # an unreadable ledger: the report still shows the run; `spectrn publish` names the fix
        return rows
    for t in targets.values():
        total = "?" if t.batches is None else t.batches
        dash = t.dashboard.name if t.dashboard else None
        rows.append(
            [
                "CloudWatch",
                f"namespace {t.namespace} ({_display_url(t.target)}): {len(t.sent)}/{total} calls sent"
                + (f", dashboard {dash}" if dash else ""),
            ]
        )
    return rows


def _utc(ts: float) -> str:
    return utc_text(ts)


def build_report(run_dir: Path, out_dir: Path | None = None, *, metrics_fn: MetricsFn | None = None) -> Path:
    """Write ``report/index.html``, ``report/*.png`` and ``report/summary.md``; returns the HTML path.

    Uses the run's summary.json (analyzing the run first when it has none). Files are replaced atomically: a symlink
    planted where a plot goes is replaced, never followed.
    """
    from spectrn.paths import safe_output_dir

    folder = RunFolder.open(run_dir)
    summary = ensure_summary(folder)
    out = safe_output_dir(Path(out_dir) if out_dir else folder.file(REPORT), what="report folder")
    values = values_by_level(folder, metrics_fn or default_metrics_fn(summary.provenance.time_scale))
    images = level_images(summary, values, out)
    if len(summary.levels) > 1:
        images.append(
            (
                "Across load levels, per prompt class",
                plot_load_levels(summary, out / "load.png"),
                "TPOT p50 (top) and aggregate output throughput (bottom) at each load level, one column per prompt "
                "class and the last for all classes pooled (95% CIs): where speculation stops paying off.",
            )
        )
    images.append(
        (
            "Throughput per instance vs speed per user, all prompt classes pooled",
            plot_pareto(summary, out / "pareto.png"),
            "Each point is a load level (all prompt classes pooled): output tokens/s per instance against the median "
            "request's output tokens/s. Up and to the right is better; the curve with speculation lying above the "
            "one without means more users served at the same speed.",
        )
    )
    markdown = summary_markdown(summary, folder.meta.config, ignore_eos=folder.meta.ignore_eos)
    index = folder.write_report(out, markdown, report_html(folder, summary, images, markdown))
    for _, img, _ in images:
        img.chmod(0o644)  # a report is meant to be shared (atomic writes create 0600 files)
    return index
