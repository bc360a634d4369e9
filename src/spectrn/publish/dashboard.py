"""The side-by-side comparison dashboard: its body, built from run data, and a validator of its shape."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spectrn.analyze.metric_table import Metric, dashboard_panels, displayed, of_source, reported_speedups
from spectrn.analyze.run import ensure_summary
from spectrn.errors import PublishError
from spectrn.labels import iso_utc, series_label
from spectrn.publish.datums import ALL_CLASSES, goodput_values
from spectrn.publish.limits import MAX_DIMENSIONS, MAX_METRICS_PER_WIDGET, MAX_WIDGETS
from spectrn.run.folder import RunFolder, dim_value
from spectrn.run.summary import Load, Summary

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig

VARIANT_COLORS = {"baseline": "#1f77b4", "speculative": "#ff7f0e"}


_PALETTE = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


_STAT_RE = re.compile(r"^(SampleCount|Average|Sum|Minimum|Maximum|IQM|p\d{1,2}(\.\d+)?|p100|(tm|wm|tc|ts|pr)\d{1,2})$")


_WIDGET_TYPES = {"metric", "text", "log", "alarm", "explorer"}


_VIEWS = {"timeSeries", "singleValue", "bar", "pie", "table", "gauge"}


_METRIC_OPTS = {"stat", "label", "color", "period", "yAxis", "id", "visible", "region", "accountId", "unit"}


@dataclass
class DashboardRun:
    """One (run id, config) pair a dashboard shows; a sweep passes several with the same run id."""

    run_id: str
    config_label: str
    levels: list[str]
    prompt_classes: list[str]
    variants: list[str]
    start: float
    end: float
    has_acceptance: bool = False
    markdown: str = ""
    # (level, prompt class or "all", variant) -> the goodput metrics published for it (runs with a per-request SLO)
    goodput: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)


def dashboard_name(prefix: str, run_id: str) -> str:
    """``<prefix>-<run id>`` with anything but letters, digits, '-' and '_' replaced (CloudWatch's rule)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", f"{prefix}-{run_id}")
    return name[:255]


def dashboard_run(run: RunFolder, *, run_id: str | None = None, time_shift_s: float = 0.0) -> DashboardRun:
    summary = ensure_summary(run)
    start, end = summary.time_range or (run.meta.started_at, run.meta.finished_at or run.meta.started_at)
    return DashboardRun(
        run_id=dim_value(run_id or run.run_id),
        config_label=dim_value(summary.config_label),
        levels=[dim_value(lv) for lv in summary.level_labels],
        prompt_classes=[dim_value(c) for c in summary.prompt_classes],
        variants=summary.variant_names,
        start=start + time_shift_s,
        end=end + time_shift_s,
        has_acceptance=summary.has_acceptance,
        markdown=run_markdown(run.meta.config, summary),
        goodput={
            (dim_value(level), dim_value(cls) if cls is not None else ALL_CLASSES, dim_value(variant)): list(values)
            for level, variant, cls, values in goodput_values(summary)
        },
    )


def run_markdown(c: SpectrnConfig, s: Summary) -> str:
    """The dashboard's text widget: what ran and the speedups analyze measured (per prompt class)."""
    b = c.bench
    lines = [
        f"# spectrn run {s.run_id}",
        f"target **{c.target}**, draft **{c.draft}**, window **{c.num_speculative_tokens}**, mode "
        f"{c.speculation_mode}, {c.instance_type} TP{c.tensor_parallel_size}, max-num-seqs {c.max_num_seqs}; "
        f"prompts {b.prompts}, {b.requests} requests per endpoint, max_tokens {b.max_tokens}, "
        f"temperature {b.temperature}",
    ]
    if s.provenance.time_scale != 1.0:
        lines.append(f"simulated at time scale {s.provenance.time_scale:g}; figures rescaled to real time")
    if not s.verdict.performance:
        lines.append("**NOT A PERFORMANCE RESULT:** " + "; ".join(s.verdict.reasons))
    lv = s.levels[0]
    rows = [(cls, cs.speedup) for cls, cs in sorted(lv.by_prompt_class.items()) if cs.speedup is not None]
    if rows:
        # the speedups summary.md shows, the first named as such
        shown = [(m, m.speedup) for m in displayed("markdown") if m.speedup is not None]
        heads = [f"{d.label} speedup" if i == 0 else str(d.label) for i, (_, d) in enumerate(shown)]
        lines += ["", "| prompt class | " + " | ".join(heads) + " |", "|---|" + "---|" * len(shown)]
        for cls, sp in rows:
            assert sp is not None
            cells = [(x.text() if (x := getattr(sp, d.field)) is not None else "n/a") for _, d in shown]
            lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    spec = lv.variants.get("speculative")
    acc = spec.acceptance if spec is not None else None
    if acc is not None and acc.rate is not None:
        length = f"{acc.mean_accepted_length:.2f}" if acc.mean_accepted_length is not None else "n/a"
        lines.append(f"\nacceptance ({acc.source}) rate {100 * acc.rate:.1f} %, mean acceptance length {length}")
    if not s.clean:
        lines.append("\n**not clean:** " + "; ".join(s.warnings()[:5]))
    return "\n".join(lines)


def build_dashboard(runs: Sequence[DashboardRun], *, namespace: str, region: str) -> dict[str, Any]:
    """The comparison dashboard: a text widget, then per load level and prompt class ("all" first) one row
    of baseline-vs-speculative widgets: TTFT, TPOT, ITL, e2e (p50/p90/p99), throughput, acceptance, errors.

    Bars over the run's whole time range (``setPeriodToTimeRange``), so each bar is the run's percentile.
    """
    if not runs:
        raise PublishError("no run to build a dashboard for")
    start = min(r.start for r in runs) - 60
    end = max(r.end for r in runs) + 120
    multi = len({r.config_label for r in runs}) > 1
    widgets: list[dict[str, Any]] = []
    text = "\n\n---\n\n".join(r.markdown for r in runs if r.markdown) or f"# spectrn run {runs[0].run_id}"
    widgets.append({"type": "text", "x": 0, "y": 0, "width": 24, "height": 7, "properties": {"markdown": text}})
    y = 7
    levels = sorted({lv for r in runs for lv in r.levels}, key=lambda lv: Load.parse(lv).sort_key())
    classes = sorted({c for r in runs for c in r.prompt_classes})
    panels = dashboard_panels()
    for level in levels:
        for pclass in [ALL_CLASSES, *classes]:
            shown = [r for r in runs if level in r.levels and (pclass == ALL_CLASSES or pclass in r.prompt_classes)]
            if not shown:
                continue  # no run has this load at this prompt class: no row, and no blank space for one
            for i, (panel, members) in enumerate(panels):
                metrics: list[list[Any]] = []
                color_i = 0
                for r in shown:
                    for variant in r.variants:
                        color = VARIANT_COLORS.get(variant, "#7f7f7f")
                        if multi and variant != "baseline":
                            color = _PALETTE[color_i % len(_PALETTE)]
                            color_i += 1
                        dims = ["RunId", r.run_id, "Config", r.config_label, "Load", level, "Variant", variant]
                        if pclass != ALL_CLASSES:
                            dims += ["PromptClass", pclass]
                        who = series_label(r.config_label, variant, multi=multi)
                        for name, stat, label in _panel_series(members, r, variant, pclass, who):
                            metrics.append([namespace, name, *dims, {"stat": stat, "label": label, "color": color}])
                widgets.append(
                    {
                        "type": "metric",
                        "x": (i % 4) * 6,
                        "y": y + (i // 4) * 6,
                        "width": 6,
                        "height": 6,
                        "properties": {
                            "title": f"{pclass} · {level} · {panel.title}",
                            "view": "bar",
                            "region": region,
                            "metrics": metrics,
                            "stat": "p50",
                            "period": 60,
                            "setPeriodToTimeRange": True,
                            "liveData": False,
                        },
                    }
                )
            speedup = _speedup_widget(runs, level, pclass, namespace, region, multi)
            goodput = _goodput_widget(runs, level, pclass, namespace, region, multi)
            below = max(w["y"] + w["height"] for w in widgets)  # under this row's panels
            if speedup is not None:
                speedup.update(x=0, y=below, width=24 if goodput is None else 16, height=3)
                widgets.append(speedup)
            if goodput is not None:
                goodput.update(x=0 if speedup is None else 16, y=below, width=24 if speedup is None else 8, height=3)
                widgets.append(goodput)
            y = below + 3
    body = {"widgets": widgets, "start": _iso_ms(start), "end": _iso_ms(end), "periodOverride": "inherit"}
    validate_dashboard(body)
    return body


def _panel_series(
    members: Sequence[Metric], r: DashboardRun, variant: str, pclass: str, who: str
) -> list[tuple[str, str, str]]:
    """(metric, stat, label) a panel draws for one variant: each member that applies (acceptance: the pooled
    scope of a speculative variant of a run that reports it), a fallback member only where no other applies."""
    drawn: list[tuple[str, str, str]] = []
    fallback: list[tuple[str, str, str]] = []
    for m in members:
        assert m.dashboard is not None
        if m.source == "acceptance" and not (pclass == ALL_CLASSES and r.has_acceptance and variant != "baseline"):
            continue
        lines = [(m.name, s.stat, f"{who} {s.label or s.stat}") for s in m.dashboard.series]
        (fallback if m.dashboard.fallback else drawn).extend(lines)
    return drawn or fallback


def _speedup_rows() -> list[tuple[str, str, str, bool]]:
    """(metric, stat, label, speculative over baseline?) of the speedup row, from the metric table; latencies:
    baseline / speculative."""
    return [
        (m.name, "p50", s.dashboard, m.better == "higher")
        for m, s in reported_speedups()
        if s.dashboard is not None and m.published
    ]


def _speedup_widget(
    runs: Sequence[DashboardRun], level: str, pclass: str, namespace: str, region: str, multi: bool
) -> dict[str, Any] | None:
    """Single values computed by CloudWatch metric math over the whole run: baseline p50 / speculative p50
    (throughput: speculative / baseline); > 1 means speculation helps."""
    metrics: list[list[Any]] = []
    n = 0
    for r in runs:
        if level not in r.levels or (pclass != ALL_CLASSES and pclass not in r.prompt_classes):
            continue
        if not {"baseline", "speculative"} <= set(r.variants):
            continue
        for name, stat, label, spec_over_base in _speedup_rows():
            ids = {}
            for variant in ("baseline", "speculative"):
                dims = ["RunId", r.run_id, "Config", r.config_label, "Load", level, "Variant", variant]
                if pclass != ALL_CLASSES:
                    dims += ["PromptClass", pclass]
                ids[variant] = f"m{n}"
                metrics.append([namespace, name, *dims, {"stat": stat, "id": f"m{n}", "visible": False}])
                n += 1
            num, den = (
                (ids["speculative"], ids["baseline"]) if spec_over_base else (ids["baseline"], ids["speculative"])
            )
            who = f"{r.config_label} " if multi else ""
            metrics.append([{"expression": f"{num}/{den}", "label": f"{who}{label}", "id": f"e{n}"}])
            n += 1
    if not metrics:
        return None
    return {
        "type": "metric",
        "properties": {
            "title": f"{pclass} · {level} · speedups over the run (baseline / speculative; > 1 = faster)",
            "view": "singleValue",
            "region": region,
            "metrics": metrics,
            "period": 60,
            "setPeriodToTimeRange": True,
            "liveData": False,
        },
    }


def _goodput_widget(
    runs: Sequence[DashboardRun], level: str, pclass: str, namespace: str, region: str, multi: bool
) -> dict[str, Any] | None:
    """Goodput per variant as single values: requests and output tokens per second that meet every per-request
    SLO, and their share of the requests (one value per run and scope, so Average is the value)."""
    metrics: list[list[Any]] = []
    for r in runs:
        for variant in r.variants:
            names = r.goodput.get((level, pclass, variant), [])
            dims = ["RunId", r.run_id, "Config", r.config_label, "Load", level, "Variant", variant]
            if pclass != ALL_CLASSES:
                dims += ["PromptClass", pclass]
            who = series_label(r.config_label, variant, multi=multi)
            color = VARIANT_COLORS.get(variant, "#7f7f7f")
            for m in of_source("goodput"):
                if m.name in names:
                    metrics.append(
                        [
                            namespace,
                            m.name,
                            *dims,
                            {"stat": "Average", "label": f"{who} {m.goodput_label}", "color": color},
                        ]
                    )
    if not metrics:
        return None
    return {
        "type": "metric",
        "properties": {
            "title": f"{pclass} · {level} · goodput (meets every per-request SLO)",
            "view": "singleValue",
            "region": region,
            "metrics": metrics,
            "period": 60,
            "setPeriodToTimeRange": True,
            "liveData": False,
        },
    }


def _iso_ms(ts: float) -> str:
    return iso_utc(ts, millis=True)


def validate_dashboard(body: dict[str, Any] | str) -> dict[str, Any]:
    """Check a dashboard body's JSON shape and CloudWatch's limits (500 widgets, 500 metrics per widget,
    a 24-column grid without overlaps, valid stats and periods); raises ``PublishError`` listing problems."""
    problems: list[str] = []
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError as e:
            raise PublishError(f"dashboard body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise PublishError("dashboard body must be a JSON object with a 'widgets' list")
    extra = set(body) - {"widgets", "start", "end", "periodOverride", "variables"}
    if extra:
        problems.append(f"unknown top-level keys {sorted(extra)}")
    if ("start" in body) != ("end" in body) and "end" in body:
        problems.append("'end' needs 'start'")
    if body.get("periodOverride", "auto") not in ("auto", "inherit"):
        problems.append("periodOverride must be 'auto' or 'inherit'")
    widgets = body.get("widgets")
    if not isinstance(widgets, list) or not widgets:
        raise PublishError("dashboard body needs a non-empty 'widgets' list")
    if len(widgets) > MAX_WIDGETS:
        problems.append(f"{len(widgets)} widgets (max {MAX_WIDGETS})")
    boxes: list[tuple[int, int, int, int, int]] = []
    for n, w in enumerate(widgets):
        where = f"widget {n}"
        if not isinstance(w, dict):
            problems.append(f"{where} is not an object")
            continue
        if w.get("type") not in _WIDGET_TYPES:
            problems.append(f"{where}: type {w.get('type')!r}")
        geo = [w.get(k) for k in ("x", "y", "width", "height")]
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in geo):
            problems.append(f"{where}: x, y, width, height must be integers")
        else:
            x, yy, width, height = (int(g or 0) for g in geo)
            if not (0 <= x and 1 <= width and x + width <= 24 and yy >= 0 and 1 <= height <= 1000):
                problems.append(f"{where}: outside the 24-column grid (x={x}, width={width}, height={height})")
            boxes.append((n, x, yy, width, height))
        props = w.get("properties")
        if not isinstance(props, dict):
            problems.append(f"{where}: 'properties' must be an object")
            continue
        if w.get("type") == "text":
            if not isinstance(props.get("markdown"), str) or not props["markdown"].strip():
                problems.append(f"{where}: text widget needs non-empty markdown")
        elif w.get("type") == "metric":
            problems += _check_metric_props(where, props)
    boxes.sort(key=lambda b: (b[2], b[1]))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if b[2] >= a[2] + a[4]:
                break  # sorted by top edge: b and every box after it start below a's bottom edge
            if a[1] < b[1] + b[3] and b[1] < a[1] + a[3] and a[2] < b[2] + b[4]:
                problems.append(f"widgets {a[0]} and {b[0]} overlap")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise PublishError(f"invalid dashboard body: {shown}")
    return body


def _check_metric_props(where: str, props: dict[str, Any]) -> list[str]:
    out: list[str] = []
    metrics = props.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        return [f"{where}: metric widget needs a non-empty 'metrics' list"]
    if len(metrics) > MAX_METRICS_PER_WIDGET:
        out.append(f"{where}: {len(metrics)} metrics (max {MAX_METRICS_PER_WIDGET})")
    if not isinstance(props.get("region"), str) or not props["region"]:
        out.append(f"{where}: 'region' is required")
    if props.get("view", "timeSeries") not in _VIEWS:
        out.append(f"{where}: view {props.get('view')!r}")
    if "stat" in props and not _STAT_RE.match(str(props["stat"])):
        out.append(f"{where}: stat {props['stat']!r}")
    if "period" in props and not _valid_period(props["period"]):
        out.append(f"{where}: period {props['period']!r} (1, 5, 10, 30 or a multiple of 60)")
    ids = [e[-1]["id"] for e in metrics if isinstance(e, list) and e and isinstance(e[-1], dict) and "id" in e[-1]]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        out.append(f"{where}: metric id {dup!r} used twice")
    for i in ids:
        if not isinstance(i, str) or not re.fullmatch(r"[a-z][A-Za-z0-9_]*", i):
            out.append(f"{where}: metric id {i!r} must start with a lowercase letter")
    for m, entry in enumerate(metrics):
        if isinstance(entry, list) and len(entry) == 1 and isinstance(entry[0], dict) and "expression" in entry[0]:
            # CloudWatch's math functions are upper case; every lower-case name must be an id of this widget
            for name in re.findall(r"\b[a-z][A-Za-z0-9_]*\b", str(entry[0]["expression"])):
                if name not in ids:
                    out.append(f"{where} metric {m}: expression refers to unknown id {name!r}")
        if not isinstance(entry, list) or not entry:
            out.append(f"{where} metric {m}: must be a non-empty array")
            continue
        opts = entry[-1] if isinstance(entry[-1], dict) else None
        parts = entry[:-1] if opts is not None else entry
        if not parts:
            if not (opts and isinstance(opts.get("expression"), str) and opts["expression"].strip()):
                out.append(f"{where} metric {m}: needs namespace and name, or an expression")
            elif set(opts) - _METRIC_OPTS - {"expression"}:
                out.append(f"{where} metric {m}: unknown options {sorted(set(opts) - _METRIC_OPTS - {'expression'})}")
            elif not isinstance(opts.get("id"), str):
                out.append(f"{where} metric {m}: an expression needs an id")
            continue
        if not all(isinstance(p, str) and p for p in parts) or len(parts) % 2 or len(parts) < 2:
            out.append(f"{where} metric {m}: expected [namespace, name, dim, value, ..., {{options}}]")
        elif (len(parts) - 2) // 2 > MAX_DIMENSIONS:
            out.append(f"{where} metric {m}: more than {MAX_DIMENSIONS} dimensions")
        if opts is not None:
            unknown = set(opts) - _METRIC_OPTS
            if unknown:
                out.append(f"{where} metric {m}: unknown options {sorted(unknown)}")
            if "stat" in opts and not _STAT_RE.match(str(opts["stat"])):
                out.append(f"{where} metric {m}: stat {opts['stat']!r}")
            if "period" in opts and not _valid_period(opts["period"]):
                out.append(f"{where} metric {m}: period {opts['period']!r}")
    return out


def _valid_period(p: Any) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and (p in (1, 5, 10, 30) or (p > 0 and p % 60 == 0))
