"""report/index.html: a self-contained page with the tables, the plots inlined and the run's provenance."""

from __future__ import annotations

import base64
import html
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.errors import AnalysisError
from spectrn.publish.datums import MetricsFn, default_metrics_fn
from spectrn.report.format import LATENCIES, _fmt, _get, _num, _speedup, _variants, fmt_speedup, level_views
from spectrn.report.markdown import summary_markdown
from spectrn.report.plots import (
    _values_by_variant,
    plot_acceptance,
    plot_latency_by_class,
    plot_latency_cdfs,
    plot_load_levels,
    plot_speedups,
    plot_throughput,
)
from spectrn.run.folder import RunData, config_section, load_run

if TYPE_CHECKING:
    pass


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
