"""The metric table: one declaration per metric, from which every output takes its list of metrics.

The summary's paired speedups, the terminal table, summary.md, the HTML report and its plots, the CloudWatch
datums, the EMF lines and the dashboard all iterate over ``TABLE`` (through the views at the bottom), so adding a
metric is one ``Metric(...)`` here; its figures then appear wherever its fields say. Order matters where outputs
are ordered: the table's order is the order of columns and rows, of per-request EMF members, and of the
speedup rows (``Speedup.rank``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from spectrn.analyze.metrics import RequestMetrics
from spectrn.run.summary import Acceptance, Goodput, Stats, VariantSummary

# Where a metric's values come from:
#   request:    one value per completed request (RequestMetrics -> float)
#   gaps:       a list of values per completed request (per-token ITL)
#   errors:     1 per failed request, 0 per completed one
#   acceptance: one value per (load level, variant), from the server's acceptance (all prompt classes)
#   goodput:    one value per (load level, variant, prompt class or all), from the judged SLOs
Source = Literal["request", "gaps", "errors", "acceptance", "goodput"]

# The report views a metric's distribution can appear in: the terminal table (cli), summary.md and the
# dashboard's text (markdown), the HTML comparison table (html), the latency plots (plots: latencies only, the
# plots lay out a fixed grid).
View = Literal["terminal", "markdown", "html", "plots"]


@dataclass(frozen=True)
class Panel:
    """A dashboard widget group: one bar chart per (load level, prompt class) row; the metrics sharing a panel are
    drawn in it together. ``slot``: its place in the row, four panels to a line."""

    slot: int
    title: str


@dataclass(frozen=True)
class Series:
    """One statistic a panel draws per variant, labelled ``<variant> <label>`` (the statistic when empty)."""

    stat: str
    label: str = ""


@dataclass(frozen=True)
class Dashboard:
    """Where a metric shows on the dashboard. ``fallback``: drawn for a variant only when no other metric of its
    panel is (tokens per chunk where no acceptance is reported)."""

    panel: Panel
    series: tuple[Series, ...]
    fallback: bool = False


@dataclass(frozen=True)
class Display:
    """How the reports show a metric's distribution: ``short`` in the terminal and Markdown tables, ``label`` in
    the HTML table and plots, in ``unit`` (values times ``scale``, ``digits`` decimals)."""

    short: str
    label: str
    unit: str
    scale: float
    digits: int
    distribution: Callable[[VariantSummary], Stats | None]
    views: frozenset[View] = frozenset({"terminal", "markdown", "html", "plots"})
    # the VariantSummary field of the distribution, for the views that read per-request values by it (plots)
    field: str = ""

    def header(self) -> str:
        """``TTFT (ms)``: the label with its unit."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def short_header(self, which: str = "") -> str:
        """``TTFT ms`` / ``TTFT p50 ms``: the short label, the statistic and the unit."""
        return " ".join(x for x in (self.short, which, self.unit) if x)


@dataclass(frozen=True)
class Speedup:
    """A paired speedup of the metric in ``Speedups.<field>``: baseline / speculative for a lower-is-better metric,
    speculative / baseline for a higher-is-better one, by bootstrap (``spectrn.analyze.speedups.speedups``).

    ``column``: the accumulator column it pairs (``None``: computed apart, as the per-token ITL's clustered
    interval); ``center``: the statistic compared; ``seed``: its bootstrap's own seed offset, fixed per speedup so
    that adding one never moves another's interval. ``label``: its name in reports (``None``: summary.json only);
    ``rank``: its place in speedup lists; ``dashboard``: its label on the dashboard's speedup row (``None``: not
    there), where CloudWatch computes it from the ``p50`` of each variant."""

    field: str
    column: str | None
    center: Literal["median", "mean"] = "median"
    seed: int = 0
    label: str | None = None
    rank: int = 0
    dashboard: str | None = None


@dataclass(frozen=True)
class Metric:
    """One metric: its CloudWatch name (also its EMF member), unit and meaning, where its values come from, and
    where it appears."""

    name: str
    unit: str  # CloudWatch's unit
    description: str
    source: Source
    better: Literal["lower", "higher"] | None = None
    request: Callable[[RequestMetrics], float | None] | None = None  # source request
    gaps: Callable[[RequestMetrics], list[float]] | None = None  # source gaps
    acceptance: Callable[[Acceptance], float | None] | None = None  # source acceptance
    goodput: Callable[[Goodput], float | None] | None = None  # source goodput
    goodput_label: str = ""  # its label in the dashboard's goodput widget
    display: Display | None = None
    speedups: tuple[Speedup, ...] = ()
    dashboard: Dashboard | None = None
    published: bool = True  # sent to CloudWatch (datums, EMF) at all

    @property
    def speedup(self) -> Speedup | None:
        """The speedup reports show next to the metric (the first with a label)."""
        return next((s for s in self.speedups if s.label is not None), None)


def _times(scale: float, get: Callable[[Goodput], float | None]) -> Callable[[Goodput], float | None]:
    def value(g: Goodput) -> float | None:
        x = get(g)
        return None if x is None else scale * float(x)

    return value


_LATENCY = (Series("p50"), Series("p90"), Series("p99"))
_ACCEPTANCE = Panel(5, "acceptance")

TABLE: list[Metric] = [
    Metric(
        "TTFT", "Seconds", "time from send to the first token, one value per request", "request", "lower",
        request=lambda rm: rm.ttft,
        display=Display("TTFT", "TTFT", "ms", 1e3, 1, lambda vs: vs.ttft_s, field="ttft_s",
                        views=frozenset({"terminal", "html", "plots"})),
        speedups=(Speedup("ttft_p50", "ttft", seed=3, label="TTFT p50", rank=3, dashboard="TTFT p50 speedup"),),
        dashboard=Dashboard(Panel(0, "TTFT (s)"), _LATENCY),
    ),
    Metric(
        "TPOT", "Seconds", "(e2e - TTFT) / (output tokens - 1), one value per request", "request", "lower",
        request=lambda rm: rm.tpot,
        display=Display("TPOT", "TPOT", "ms", 1e3, 1, lambda vs: vs.tpot_s, field="tpot_s"),
        speedups=(
            Speedup("tpot_p50", "tpot", seed=0, label="TPOT p50", rank=0, dashboard="TPOT p50 speedup"),
            Speedup("tpot_mean", "tpot", center="mean", seed=1),
        ),
        dashboard=Dashboard(Panel(1, "TPOT (s)"), _LATENCY),
    ),
    Metric(
        "ITL", "Seconds", "every per-token gap of every request (multi-token chunks split)", "gaps", "lower",
        gaps=lambda rm: rm.itls,
        display=Display("ITL", "per-token ITL", "ms", 1e3, 1, lambda vs: vs.itl_s, field="itl_s"),
        speedups=(Speedup("itl_p50", None, label="ITL p50", rank=1, dashboard="ITL p50 speedup"),),
        dashboard=Dashboard(Panel(2, "per-token ITL (s)"), _LATENCY),
    ),
    Metric(
        "E2ELatency", "Seconds", "time from send to the last byte, one value per request", "request", "lower",
        request=lambda rm: rm.e2e,
        display=Display("e2e", "e2e latency", "s", 1.0, 2, lambda vs: vs.e2e_s, field="e2e_s"),
        speedups=(Speedup("e2e_p50", "e2e", seed=2, label="e2e p50", rank=2, dashboard="e2e p50 speedup"),),
        dashboard=Dashboard(Panel(3, "e2e latency (s)"), _LATENCY),
    ),
    Metric(
        "OutputThroughput", "Count/Second", "output tokens per second of one request", "request", "higher",
        request=lambda rm: rm.throughput_tok_s,
        display=Display("tok/s/req", "tok/s per request", "", 1.0, 1, lambda vs: vs.output_tokens_per_s.per_request,
                        views=frozenset({"terminal", "markdown", "html"})),
        speedups=(Speedup("throughput", "thr", center="mean", seed=4, label="throughput", rank=4,
                          dashboard="throughput p50 gain"),),
        dashboard=Dashboard(Panel(4, "output throughput (tok/s per request)"), (Series("p50"), Series("Average"))),
    ),
    Metric(
        "OutputTokens", "Count", "output tokens of one request", "request",
        request=lambda rm: float(rm.output_tokens),
        dashboard=Dashboard(Panel(7, "output tokens per request"), (Series("p50"), Series("Average"))),
    ),
    Metric(
        "TokensPerChunk", "None", "mean tokens per decode chunk (after the first) of a request", "request", "higher",
        request=lambda rm: rm.tokens_per_decode_chunk,
        dashboard=Dashboard(_ACCEPTANCE, (Series("Average", "tokens per chunk"),), fallback=True),
    ),
    Metric(
        "Errors", "Count", "1 per failed request, 0 per completed one (Sum = errors)", "errors", "lower",
        dashboard=Dashboard(Panel(6, "errors / requests"),
                            (Series("Sum", "errors"), Series("SampleCount", "requests"))),
    ),
    Metric(
        "AcceptanceRate", "Percent", "accepted / drafted tokens over the run (server counters)", "acceptance", "higher",
        acceptance=lambda acc: None if acc.rate is None else 100.0 * acc.rate,
        dashboard=Dashboard(_ACCEPTANCE, (Series("Average", "acceptance %"),)),
    ),
    Metric(
        "MeanAcceptanceLength", "None", "1 + accepted / drafts over the run (server counters)", "acceptance", "higher",
        acceptance=lambda acc: acc.mean_accepted_length,
        dashboard=Dashboard(_ACCEPTANCE, (Series("Average", "mean accepted length"),)),
    ),
    Metric(
        "GoodputRequests", "Count/Second", "requests meeting every per-request SLO per second of wall time",
        "goodput", "higher", goodput=_times(1.0, lambda g: g.requests_per_s), goodput_label="goodput req/s",
    ),
    Metric(
        "GoodputTokens", "Count/Second", "output tokens of those requests per second of wall time", "goodput",
        "higher", goodput=_times(1.0, lambda g: g.output_tokens_per_s), goodput_label="goodput tok/s",
    ),
    Metric(
        "GoodputShare", "Percent", "share of attempted requests meeting every per-request SLO", "goodput", "higher",
        goodput=_times(100.0, lambda g: g.fraction), goodput_label="% within SLO",
    ),
]  # fmt: skip


# ---- the views every consumer reads (functions, so that a declaration added to TABLE shows everywhere) -------


def published() -> dict[str, Metric]:
    """Every metric sent to CloudWatch, by name (datums, EMF)."""
    return {m.name: m for m in TABLE if m.published}


def of_source(source: Source) -> list[Metric]:
    """The published metrics whose values come from ``source``, in table order."""
    return [m for m in TABLE if m.published and m.source == source]


def displayed(view: View) -> list[Metric]:
    """The metrics a report view shows, in table order."""
    return [m for m in TABLE if m.display is not None and view in m.display.views]


def speedups() -> list[tuple[Metric, Speedup]]:
    """Every declared speedup, in table order (each with its own seed, so order does not change a value)."""
    return [(m, s) for m in TABLE for s in m.speedups]


def reported_speedups() -> list[tuple[Metric, Speedup]]:
    """The speedups reports list, by rank."""
    return sorted(((m, s) for m, s in speedups() if s.label is not None), key=lambda ms: ms[1].rank)


def dashboard_panels() -> list[tuple[Panel, list[Metric]]]:
    """The dashboard's panels by slot, each with its metrics in table order."""
    panels: dict[Panel, list[Metric]] = {}
    for m in TABLE:
        if m.published and m.dashboard is not None:
            panels.setdefault(m.dashboard.panel, []).append(m)
    return sorted(panels.items(), key=lambda pm: pm[0].slot)
