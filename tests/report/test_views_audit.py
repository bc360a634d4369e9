"""The smaller report views checked cell by cell against values built here by hand: the repeats table, the
capacity table and its sentences, the batch-limit lines and the run comparison's table and Markdown. Each expected
string is worked out from the inputs (units, digits, which side is which, the sign of a difference)."""

from __future__ import annotations

from typing import Any

from spectrn.report.batch_limit import batch_limit_lines
from spectrn.report.capacity import capacity_html, capacity_markdown, capacity_rows, stops_paying_text, summary_lines
from spectrn.report.compare import compare_markdown, compare_table, differences_table
from spectrn.report.repeats import figure_text, repeats_table
from spectrn.run.capacity import (
    Capacity,
    Estimate,
    LoadComparison,
    Price,
    Probe,
    ProbeVerdict,
    Ratio,
    StopsPaying,
    TwinCapacity,
    VariantCapacity,
)
from spectrn.run.repeats import RepeatedFigure, RepeatedLevel, RepeatedScope, RepeatedSpeedups, RepeatedVariant, Repeats
from spectrn.run.summary import LevelSummary, Load, Summary, Verdict


def _rows(table: Any) -> list[list[str]]:
    columns = [[str(c) for c in col._cells] for col in table.columns]
    return [list(r) for r in zip(*columns, strict=True)]


# ---- repeats ----------------------------------------------------------------------------------------------------


def _fig(point: float, lo: float, hi: float, cv: float) -> RepeatedFigure:
    return RepeatedFigure(point=point, ci95=(lo, hi), runs=[point, point], cv=cv)


def _rvariant(ttft: float, tpot: float, tput: float, usd: float) -> RepeatedVariant:
    return RepeatedVariant(
        ttft_p50_s=_fig(ttft, ttft * 0.9, ttft * 1.1, 0.0123),
        tpot_p50_s=_fig(tpot, tpot * 0.9, tpot * 1.1, 0.0456),
        output_tokens_per_s=_fig(tput, tput - 10, tput + 10, 0.02),
        usd_per_million_output_tokens=_fig(usd, usd - 1, usd + 1, 0.031),
    )


def _repeats(*labels: str) -> Repeats:
    scope = RepeatedScope(
        variants={
            "baseline": _rvariant(0.1234, 0.04567, 400.0, 69.52),
            "speculative": _rvariant(0.1111, 0.01523, 1000.0, 24.61),
        },
        speedup=RepeatedSpeedups(
            tpot_p50=_fig(3.0, 2.9, 3.1, 0.01),
            ttft_p50=_fig(1.11, 1.05, 1.17, 0.02),
            aggregate_throughput=_fig(2.5, 2.4, 2.6, 0.03),
        ),
    )
    return Repeats(
        run_id="rep-1", repeats=3, method="two-stage bootstrap", resamples=1000,
        levels=[RepeatedLevel(label=x, scopes={"all": scope}) for x in labels],
    )  # fmt: skip


# TTFT 0.1234 s -> 123.4 ms, interval x0.9/x1.1 -> [111.1, 135.7]; TPOT 0.04567 -> 45.7 [41.1, 50.2];
# cv 0.0123 -> 1.2%; $/M with two decimals; speedups with an x and two decimals
REPEAT_ROWS = [
    ["all (pooled)", "TTFT p50 ms", "123.4 [111.1, 135.7] cv 1.2%", "111.1 [100.0, 122.2] cv 1.2%",
     "1.11x [1.05, 1.17] cv 2.0%"],
    ["", "TPOT p50 ms", "45.7 [41.1, 50.2] cv 4.6%", "15.2 [13.7, 16.8] cv 4.6%", "3.00x [2.90, 3.10] cv 1.0%"],
    ["", "aggregate tok/s", "400.0 [390.0, 410.0] cv 2.0%", "1000.0 [990.0, 1010.0] cv 2.0%",
     "2.50x [2.40, 2.60] cv 3.0%"],
    ["", "$/M tokens", "69.52 [68.52, 70.52] cv 3.1%", "24.61 [23.61, 25.61] cv 3.1%", ""],
]  # fmt: skip


def test_repeats_table_has_every_cell_in_its_unit_with_interval_and_cv() -> None:
    table = repeats_table(_repeats("c4"))
    assert str(table.title).startswith("spectrn rep-1 at c4, 3 runs: mean over runs")
    assert _rows(table) == REPEAT_ROWS


def test_repeats_table_of_several_levels_names_each_level_once() -> None:
    rows = _rows(repeats_table(_repeats("c4", "c8")))
    assert [r[0] for r in rows] == ["c4", "", "", "", "c8", "", "", ""]
    assert [r[1:] for r in rows[4:]] == REPEAT_ROWS


def test_repeats_table_lists_each_class_before_the_pooled_figure() -> None:
    rep = _repeats("c4")
    pooled = rep.levels[0].scopes["all"]
    rep.levels[0].scopes = {"all": pooled, "open": pooled, "structured": pooled}  # repeats.json: "all" first
    rows = _rows(repeats_table(rep))
    # as in every comparison table: classes can disagree in sign, so the pooled figure is never read first
    assert [r[0] for r in rows if r[0]] == ["open", "structured", "all (pooled)"]


def test_figure_text_without_interval_or_cv_or_point() -> None:
    assert figure_text(RepeatedFigure(point=2.0), 1.0, 2, ratio=True) == "2.00x"
    assert figure_text(RepeatedFigure(point=0.05, cv=float("nan")), 1e3, 1) == "50.0"
    assert figure_text(RepeatedFigure(point=None, cv=0.1)) == "n/a"
    assert figure_text(None) == "n/a"


# ---- capacity ---------------------------------------------------------------------------------------------------


def _vcap(capacity: float | None, **kw: Any) -> VariantCapacity:
    base: dict[str, Any] = dict(capacity_per_instance=None if capacity is None else capacity * 2, first_fail=None,
                                reached_max=False, monotone=True, probes=4)  # fmt: skip
    return VariantCapacity(capacity=capacity, **{**base, **kw})


def _capacity(load_kind: str = "concurrency") -> Capacity:
    """Baseline capacity 8 (first fail 12.25), speculative at least 32 (the maximum passed)."""
    return Capacity(
        capacity_id="cap-1", created_at="2026-01-01T00:00:00Z", load_kind=load_kind,  # type: ignore[arg-type]
        slos=["p90:tpot<=50ms", "p99:ttft<=2s"], start=2, maximum=32, precision=0.25, precision_rule="within 25%",
        requests_per_probe=40, requests_rule="40 per variant", runtime="sim", speculative_window=4,
        price=Price(instance_type="trn2.48xlarge", instance_hourly_usd=35.7632, instances_per_service=0.5,
                    source="on-demand us-east-1"),
        variants={
            "baseline": _vcap(8, first_fail=12.25, tpot_p50_s=0.04567, ttft_p50_s=0.2012,
                              output_tokens_per_s_per_instance=Estimate(value=812.34, ci95=(800.0, 830.0)),
                              usd_per_million_output_tokens=Estimate(value=12.229, ci95=(11.5, 13.0))),
            "speculative": _vcap(32, reached_max=True, tpot_p50_s=0.01523, ttft_p50_s=0.1507,
                                 output_tokens_per_s_per_instance=Estimate(value=2100.0),
                                 usd_per_million_output_tokens=Estimate(value=4.73)),
        },
        capacity_ratio=Ratio(value=4.0, ci95=(2.56, 4.0)),
        throughput_ratio=Ratio(value=2.585),
        cost_ratio=Ratio(value=0.387, ci95=(0.35, 0.42)),
        stops_paying=StopsPaying(cost_from=None, tpot_from=16, compared=[
            LoadComparison(load=x, throughput_ratio=Estimate(value=1.0), tpot_speedup=Estimate(value=1.0))
            for x in (16, 4, 8)
        ]),
        probes=[Probe(load=12.5, phase="bisection", run_dir="p-12.5", verdicts={
            "baseline": ProbeVerdict(passed=False, reasons=["p90 TPOT 55 ms > 50 ms"]),
            "speculative": ProbeVerdict(passed=True),
        })],
        twin=TwinCapacity(twin="twin-1", windows={"baseline": 6, "k4": 28, "k8": None}, note="p50 only"),
    )  # fmt: skip


def test_capacity_table_has_every_cell_per_variant_and_the_ratios() -> None:
    header, rows = capacity_rows(_capacity())
    assert header == ["", "baseline", "speculative", "speculative / baseline"]
    assert rows == [
        ["capacity (concurrent requests per service)", "8", ">= 32", "4.00x [2.56, 4.00]"],
        ["capacity per instance (x2)", "16.0", "64.0", ""],  # 1 / 0.5 instances per service
        ["first failing load", "12.25", "none", ""],  # 12.250 less its trailing zero
        ["output tok/s per instance at capacity", "812.3 [800.0, 830.0]", "2100.0", "2.58x"],
        ["$/M output tokens at capacity", "$12.23 [$11.50, $13.00]", "$4.73", "0.39x [0.35, 0.42]"],
        ["TPOT p50 at capacity (ms)", "45.7", "15.2", ""],
        ["TTFT p50 at capacity (ms)", "201.2", "150.7", ""],
        ["probes", "4", "4", ""],
    ]


def test_capacity_of_one_variant_at_a_rate_has_no_ratio_column() -> None:
    c = _capacity("rate")
    c.variants = {"baseline": _vcap(None, first_fail=2.0)}
    header, rows = capacity_rows(c)
    assert header == ["", "baseline"]
    assert rows[0] == ["capacity (req/s per service)", "below 2"]  # the start already fails
    assert rows[2] == ["first failing load", "2"]


def test_capacity_sentences_name_slos_price_and_where_speculation_stops_paying() -> None:
    assert summary_lines(_capacity()) == [
        "SLOs: p90:tpot<=50ms, p99:ttft<=2s; search over concurrency from 2 (doubling, then bisection; precision: "
        "within 25%; maximum 32)",
        "requests per probe: 40 per variant",
        "price: $35.76/h per trn2.48xlarge (on-demand us-east-1), one service uses 0.5 of an instance",
        # the largest load compared is 16
        "speculation stops paying: $/M not within the searched range (up to 16); TPOT from 16",
        # the twin's windows next to the measured ones: baseline 8, k4 is the speculative window (32)
        "twin twin-1 predicts capacity (concurrency): baseline: 6 (measured 8); k4: 28 (measured 32); "
        "k8: below the start (p50 only)",
    ]


def test_stops_paying_says_not_measured_without_a_compared_load() -> None:
    c = _capacity()
    c.stops_paying = StopsPaying(cost_from=4, tpot_from=None, compared=[])
    assert stops_paying_text(c) == "speculation stops paying: not measured (no load was probed with both variants)"
    c.stops_paying.compared = [LoadComparison(load=4, throughput_ratio=Estimate(), tpot_speedup=Estimate())]
    assert stops_paying_text(c) == (
        "speculation stops paying: $/M from 4 concurrent requests; TPOT not within the searched range (up to 4)"
    )


def test_capacity_markdown_lists_each_probe_verdict() -> None:
    md = capacity_markdown(_capacity()).splitlines()
    assert "| 12.5 | bisection | baseline | MISSES: p90 TPOT 55 ms > 50 ms | p-12.5 |" in md
    assert "| 12.5 | bisection | speculative | meets the SLOs | p-12.5 |" in md


# ---- batch limit ------------------------------------------------------------------------------------------------


def _levels(*labels: str) -> Summary:
    return Summary(run_id="r", verdict=Verdict(clean=True, performance=True),
                   levels=[LevelSummary(load=Load.parse(x)) for x in labels])  # fmt: skip


def test_batch_limit_names_only_closed_levels_with_more_streams_than_seqs() -> None:
    lines = batch_limit_lines(_levels("c4", "c8", "c12", "r16"), 8)
    assert lines == [
        "c12 is above the batch limit (max_num_seqs 8): 12 streams, at most 8 decoded at once; the other 4 wait "
        "in the server's queue, so TTFT and e2e at this load include queueing and throughput is capped by the batch"
    ]
    assert batch_limit_lines(_levels("c12"), None) == []


# ---- compare ----------------------------------------------------------------------------------------------------


def _cmp(clean_b: bool = True) -> dict[str, Any]:
    return {
        "a": {"run_id": "run-a", "config": "k4", "clean": True, "provenance": "runtime sim"},
        "b": {"run_id": "run-b", "config": "k8", "clean": clean_b, "provenance": "runtime cluster"},
        "provenance_differences": {"runtime": ["sim", "cluster"]},
        "warnings": ["the runs differ in runtime"],
        "pairs": [["c4", "c4"]],
        "config_differences": {"num_speculative_tokens": [4, 8]},
        "rows": [],
        "speedups": [
            {"level": "c4", "prompt_class": "all", "metric": "TPOT p50", "a": 2.5, "a_ci95": [2.4, 2.6],
             "b": 3.1, "b_ci95": [3.0, 3.2]},
            {"level": "c4", "prompt_class": "all", "metric": "TTFT p50", "a": 1.2, "a_ci95": None,
             "b": None, "b_ci95": None},
        ],
        "differences": [
            {"level": "c4", "prompt_class": "all", "variant": "speculative", "metric": "TPOT p50", "ratio": 0.8123,
             "ci95": [0.8, 0.825]},
        ],
    }  # fmt: skip


def test_compare_table_shows_b_minus_a_and_each_runs_interval() -> None:
    rows = _rows(compare_table(_cmp()))
    assert rows == [
        ["c4", "all", "TPOT p50", "2.50x [2.40, 2.60]", "3.10x [3.00, 3.20]", "+0.60"],  # 3.1 - 2.5
        ["", "", "TTFT p50", "1.20x", "n/a", "n/a"],
    ]


def test_compare_markdown_titles_b_against_a_and_fills_every_table() -> None:
    md = compare_markdown(_cmp(clean_b=False)).splitlines()
    assert md[0] == "### spectrn: `run-b` (`k8`) vs `run-a` (`k4`)"
    assert "| c4 | all | TPOT p50 | 2.50x [2.40, 2.60] | 3.10x [3.00, 3.20] | +0.60 |" in md
    assert "| c4 | all | TTFT p50 | 1.20x | n/a | n/a |" in md
    assert "| c4 | all | speculative | TPOT p50 | 0.812x [0.800, 0.825] |" in md  # B / A with three digits
    assert '- runtime: `"sim"` → `"cluster"`' in md
    assert "- `num_speculative_tokens`: `4` → `8`" in md
    assert "**run run-b is not clean**" in md and "**run run-a is not clean**" not in md


def test_differences_table_names_each_scope_once_and_gives_b_over_a_with_three_digits() -> None:
    cmp = _cmp()
    cmp["differences"].append(
        {"level": "c4", "prompt_class": "all", "variant": "speculative", "metric": "aggregate tok/s", "ratio": 1.25,
         "ci95": None}
    )  # fmt: skip
    cmp["differences"].append(
        {"level": "c4", "prompt_class": "all", "variant": "baseline", "metric": "TPOT p50", "ratio": None, "ci95": None}
    )
    t = differences_table(cmp)
    assert str(t.title) == "B / A: B = run-b  over  A = run-a (95% CI, each run resampled)"
    assert _rows(t) == [
        ["c4", "all", "speculative", "TPOT p50", "0.812x [0.800, 0.825]"],
        ["", "", "", "aggregate tok/s", "1.250x"],
        ["c4", "all", "baseline", "TPOT p50", "n/a"],
    ]


def test_capacity_page_gives_each_probe_verdict_and_links_its_run() -> None:
    page = capacity_html(_capacity())
    assert (
        "<tr><td>12.5</td><td>bisection</td><td>baseline</td><td>MISSES: p90 TPOT 55 ms &gt; 50 ms</td>"
        '<td><a href="p-12.5/summary.json">p-12.5</a></td></tr>'
    ) in page
    assert "<td>speculative</td><td>meets the SLOs</td>" in page
    assert "<td>capacity (concurrent requests per service)</td><td>8</td><td>&gt;= 32</td>" in page
