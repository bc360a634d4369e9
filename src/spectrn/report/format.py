"""Shared formatting of summary values: numbers, load levels, provenance, colours (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeVar

from spectrn.analyze.metric_table import Metric, displayed, reported_speedups
from spectrn.labels import ALL_CLASSES, class_label
from spectrn.run.summary import ClassSummary, LevelSummary, Speedup, Speedups, Summary, VariantSummary

T = TypeVar("T")

VARIANT_COLORS = {"baseline": "#1f77b4", "speculative": "#ff7f0e"}
OTHER_COLORS = ["#2ca02c", "#d62728", "#9467bd", "#8c564b"]

# (VariantSummary field, label, scale, unit, digits) of the plotted latencies: scale turns seconds into the shown
# unit (from the metric table)
LATENCIES = [(d.field, d.label, d.scale, d.unit, d.digits) for m in displayed("plots") if (d := m.display) is not None]

# (Speedups field, label) of the speedups reports list, in their order (from the metric table)
SPEEDUPS = [(s.field, str(s.label)) for _, s in reported_speedups()]


def figure(vs: VariantSummary | None, m: Metric, which: str) -> float | None:
    """One figure of a metric's distribution in a variant (None when absent), e.g. ``figure(vs, tpot, "p90")``."""
    if vs is None or m.display is None:
        return None
    value = getattr(m.display.distribution(vs), which, None)
    return value if isinstance(value, float | int) else None


def metric_text(vs: VariantSummary | None, m: Metric, which: str = "p50") -> str:
    """That figure as a report shows it: in the metric's display unit and digits (``n/a`` when absent)."""
    d = m.display
    return "n/a" if d is None else num(figure(vs, m, which), d.scale, d.digits)


def metric_speedup(sp: Speedups | None, m: Metric) -> str:
    """The speedup reports show next to a metric (``n/a`` when it has none or it was not computed)."""
    decl = m.speedup
    return speedup_text(speedup_of(sp, decl.field) if decl is not None else None)


def color(variant: str, i: int) -> str:
    return VARIANT_COLORS.get(variant, OTHER_COLORS[i % len(OTHER_COLORS)])


def pooled_last(scopes: Iterable[tuple[str, T]]) -> list[tuple[str, T]]:
    """Each prompt class, then all classes pooled: classes can disagree in sign, so the pooled figure is never the
    first one read (every comparison table and plot orders its scopes so)."""
    items = list(scopes)
    return [s for s in items if s[0] != ALL_CLASSES] + [s for s in items if s[0] == ALL_CLASSES]


def class_scopes(lv: LevelSummary) -> list[tuple[str, ClassSummary]]:
    """A level's prompt classes, then all classes pooled (``pooled_last``)."""
    return pooled_last(lv.scopes())


def num(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x * scale:.{digits}f}"


def stat(vs: VariantSummary | None, field: str, which: str = "p50") -> float | None:
    """One figure of a variant's distribution (a ``Stats`` field), e.g. ``stat(vs, "tpot_s")`` (None when absent)."""
    if vs is None:
        return None
    value = getattr(getattr(vs, field), which)
    return value if isinstance(value, float | int) else None


def speedup_of(sp: Speedups | None, key: str) -> Speedup | None:
    return getattr(sp, key, None)


def speedup_text(sp: Speedup | None) -> str:
    return sp.text() if sp is not None else "n/a"


def significance(sp: Speedup) -> str:
    verdict = sp.verdict
    if verdict is None:
        return ""
    if verdict == "not significant":
        return " (not significant: the CI includes 1.0)"
    return f" (significant: {verdict})"


def usd(x: float | None) -> str:
    return "n/a" if x is None else f"${x:.2f}"


def provenance_line(s: Summary) -> str:
    """Where the numbers come from, in one line: runtime, profile, time scale, engine, load shape."""
    p = s.provenance
    parts = [f"runtime {p.runtime}" + (" (servers started by spectrn)" if p.started_by_spectrn else "")]
    if p.profile:
        parts.append(f"server profile {p.profile}")
    if p.time_scale != 1.0:
        parts.append(
            f"simulated at time scale {p.time_scale:g}: figures rescaled to real time"
            if p.rescaled
            else f"simulated at time scale {p.time_scale:g}: figures are SCALED, not real time"
        )
    elif p.runtime == "endpoints":  # no server says its time scale: name what the figures assume
        parts.append("figures in the servers' own time (simulators run at a time scale: pass it as --time-scale)")
    if p.engine != "spectrn":
        parts.append(f"load generator {p.engine}")
    if p.load_shape:
        parts.append(f"load shape: {p.load_shape}")
    return "; ".join(parts)


def price_line(s: Summary) -> str | None:
    """The price behind every $/M figure and where it came from (None: the run has no cost figure)."""
    cost = next((vs.cost for lv in s.levels for _, cs in lv.scopes() for vs in cs.variants.values() if vs.cost), None)
    if cost is None:
        return None
    source = cost.price_source or f"${cost.instance_hourly_usd:.2f}/h (source not recorded)"
    mixed = any(len(lv.by_prompt_class) > 1 for lv in s.levels)
    return f"$/M tokens at {source} x {cost.instances_per_service:g} instance per service" + (
        "; a prompt class is billed its share of the level's time by decode slot-seconds" if mixed else ""
    )


def verdict_line(s: Summary) -> str:
    parts = ["clean run" if s.clean else "NOT A CLEAN RUN"]
    if not s.verdict.performance:
        parts.append("NOT A PERFORMANCE RESULT (" + "; ".join(s.verdict.reasons) + ")")
    return "; ".join(parts)


def models_shown(s: Summary, target: str, draft: str) -> tuple[str, str]:
    """(target, draft) as a report names them: the configuration's models, except on vLLM on CPU, where tiny
    offline models serve whatever the configuration says (it only labels the run)."""
    if s.provenance.runtime != "vllm-cpu":
        return target, draft
    served = ", ".join(sorted({i.model for i in s.provenance.servers.values() if i.model})) or s.model
    served = served or "tiny offline model"
    return (
        f"{served} (tiny model on vLLM on CPU; the configured {target} did not run)",
        f"tiny draft model (the configured {draft} did not run)",
    )


def not_performance_banner(s: Summary) -> str:
    """The verdict of a run whose timing means nothing (vLLM on CPU, coalesced streams, too few events)."""
    return "NOT A PERFORMANCE RESULT: " + "; ".join(s.verdict.reasons)


def correctness_lines(s: Summary) -> list[str]:
    """What a run proves besides timing, one line each: requests and how their tokens were counted, acceptance,
    greedy-output equivalence. The headline of a run that is not a performance result."""
    multi = len(s.levels) > 1
    out = []
    for lv in s.levels:
        where = f"[{lv.label}] " if multi else ""
        for v in lv.variant_names():
            vs = lv.variants[v]
            rq = vs.requests
            planned = f" of {rq.planned}" if rq.planned is not None else ""
            sources = ", ".join(f"{k} ({n})" for k, n in sorted(vs.token_sources.items())) or "not recorded"
            out.append(
                f"{where}{v}: {rq.completed}{planned} requests completed, {rq.errors} failed; "
                f"token accounting: {sources}"
            )
        spec = lv.variants.get("speculative")
        acc = spec.acceptance if spec is not None else None
        if acc is not None and acc.mean_accepted_length is not None:
            rate = f", {acc.rate:.0%} of drafted tokens accepted" if acc.rate is not None else ""
            agree = f"; {acc.agreement}" if acc.agreement else ""
            out.append(
                f"{where}acceptance: {acc.mean_accepted_length:.2f} tokens per step{rate} (from {acc.source}){agree}"
            )
        elif spec is not None:
            out.append(f"{where}acceptance: not reported")
        eq = lv.equivalence
        if eq is not None and eq.compared:
            out.append(f"{where}output equivalence: {eq.matched}/{eq.compared} greedy outputs identical ({eq.basis})")
        else:
            out.append(f"{where}output equivalence: not compared")
    return out


def headline_lines(s: Summary) -> list[str]:
    """One line per headline item: ``[c4] structured: TPOT p50 speedup 3.01x [2.98, 3.12] (significant: faster)``."""
    multi = len(s.levels) > 1
    out = []
    for h in s.headline:
        where = f"[{h.level}] " if multi else ""
        scope = "declared mix" if h.scope == "mix" else h.scope
        cost = headline_cost(s, h.level, h.scope)
        out.append(f"{where}{scope}: TPOT p50 speedup {h.speedup.text()}{significance(h.speedup)}{cost}")
    return out


def headline_cost(s: Summary, level: str, scope: str) -> str:
    """``; $/M output tokens $69.52 -> $24.61``: baseline and speculative cost of the headline's scope (the
    pooled variants for the declared mix), empty where either is unknown."""
    lv = s.level(level)
    cls = lv.by_prompt_class.get(scope)
    variants = cls.variants if cls is not None else lv.variants
    usd = []
    for v in ("baseline", "speculative"):
        vs = variants.get(v)
        value = vs.cost.usd_per_million_output_tokens if vs is not None and vs.cost is not None else None
        if value is None:
            return ""
        usd.append(value)
    return f"; $/M output tokens ${usd[0]:.2f} -> ${usd[1]:.2f}"


def slo_verdict(met: bool | None) -> str:
    return "met" if met else "MISSED" if met is False else "not judged"


def slo_check_text(vs: VariantSummary | None, slo: str) -> str:
    """``52.7 ms MISSED``: the observed percentile of one percentile SLO and its verdict (``n/a``: not judged)."""
    g = vs.goodput if vs is not None else None
    check = next((c for c in g.checks if c.slo == slo), None) if g is not None else None
    if check is None:
        return "n/a"
    seen = "no value" if check.observed_s is None else f"{check.observed_s * 1e3:.1f} ms"
    return f"{seen} {slo_verdict(check.met)}"


def goodput_cells(vs: VariantSummary | None) -> tuple[str, str, str]:
    """(requests/s, output tokens/s, share of requests within every per-request SLO), ``n/a`` where undefined."""
    g = vs.goodput if vs is not None else None
    if g is None or not g.slos:
        return "n/a", "n/a", "n/a"
    share = f"{g.fraction:.0%}" if g.fraction is not None else "n/a"
    return num(g.requests_per_s, 1.0, 2), num(g.output_tokens_per_s), share


def slo_names(variants: Iterable[VariantSummary | None]) -> tuple[list[str], list[str]]:
    """(per-request SLOs, percentile SLOs) named in any of ``variants``, in first-seen order."""
    per_request: dict[str, None] = {}
    checks: dict[str, None] = {}
    for vs in variants:
        if vs is not None and vs.goodput is not None:
            per_request.update(dict.fromkeys(vs.goodput.slos))
            checks.update(dict.fromkeys(c.slo for c in vs.goodput.checks))
    return list(per_request), list(checks)


def slo_table(level: LevelSummary) -> tuple[list[str], list[list[str]]] | None:
    """One row per (prompt class, variant) of a level: goodput (requests/s, output tokens/s, share within every
    per-request SLO), then each percentile SLO's observed value and verdict. None when the run sets no SLO."""
    scopes = [
        (class_label(cls), v, cs.variants.get(v))
        for cls, cs in class_scopes(level)
        for v in level.variant_names()
        if cs.variants.get(v) is not None
    ]
    per_request, checks = slo_names(vs for _, _, vs in scopes)
    if not per_request and not checks:
        return None
    within = "within " + ", ".join(per_request) if per_request else "within (no per-request SLO)"
    header = ["prompt class", "variant", "goodput req/s", "goodput tok/s", within, *checks]
    rows = [[cls, v, *goodput_cells(vs), *(slo_check_text(vs, c) for c in checks)] for cls, v, vs in scopes]
    return header, rows


GOODPUT_DEFINITION = (
    "goodput = completed requests meeting every per-request SLO of their prompt class (and their output tokens) "
    "per second of the scope's wall time, as aggregate throughput; a percentile SLO is met when the observed "
    "percentile is at most its limit (docs/slo.md)"
)


def output_lengths_text(ignore_eos: bool | None) -> str:
    """How the run's outputs ended: forced to max_tokens (ignore_eos) or at their natural length."""
    if ignore_eos is None:
        return "not recorded"
    if ignore_eos:
        return "fixed: every request exactly its max_tokens (ignore_eos)"
    return "natural: each request ends at end-of-sequence, at most its max_tokens"
