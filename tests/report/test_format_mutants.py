"""The shared formatting of report values where a scope lacks something: a variant or a metric without a figure,
no price, no planned count, no token accounting, acceptance without a rate or an agreement, a headline without an
interval, SLOs of one kind only, a goodput share that could not be computed; the plot colours of named and other
variants; and the models a vLLM-on-CPU run names. Every expected string, line and row is written out here from
the summaries' own numbers."""

from __future__ import annotations

from typing import Any

from spectrn.analyze.metric_table import TABLE, Metric
from spectrn.report.format import (
    color,
    correctness_lines,
    goodput_cells,
    headline_lines,
    metric_speedup,
    metric_text,
    models_shown,
    not_performance_banner,
    price_line,
    slo_check_text,
    slo_table,
    speedup_of,
    stat,
    usd,
)
from spectrn.run.summary import (
    Acceptance,
    ClassSummary,
    Cost,
    Equivalence,
    Goodput,
    HeadlineItem,
    LevelSummary,
    Load,
    Provenance,
    Requests,
    ServerIdentity,
    SloCheck,
    Speedup,
    Speedups,
    Stats,
    Summary,
    Throughput,
    VariantSummary,
    Verdict,
)


def _metric(name: str) -> Metric:
    return next(m for m in TABLE if m.name == name)


def _stats(p50: float, p90: float) -> Stats:
    return Stats(n=10, p50=p50, mean=p50, p90=p90, p95=p90, p99=p90)


def _variant(
    tpot: float = 0.025, completed: int = 10, errors: int = 0, planned: int | None = 10, **extra: Any
) -> VariantSummary:
    return VariantSummary(
        ttft_s=_stats(0.2, 0.4), tpot_s=_stats(tpot, 0.075), itl_s=_stats(0.02, 0.05), e2e_s=_stats(3.0, 5.0),
        chunk_latency_s=_stats(0.02, 0.05), llmperf_itl_s=Stats(n=0),
        output_tokens_per_s=Throughput(per_request=_stats(40.0, 50.0), aggregate=160.0),
        output_tokens=_stats(128, 128), requests=Requests(planned=planned, completed=completed, errors=errors),
        **extra,
    )  # fmt: skip


def _cost(usd: float | None) -> Cost:
    return Cost(instance_hourly_usd=4.5, instances_per_service=0.5, usd_per_million_output_tokens=usd)


def _summary(levels: list[LevelSummary], **extra: Any) -> Summary:
    return Summary(run_id="run-7", verdict=Verdict(clean=True, performance=True), levels=levels, **extra)


def test_named_variants_keep_their_colour_and_others_take_the_palette_by_position() -> None:
    assert color("baseline", 2) == "#1f77b4"
    assert color("speculative", 3) == "#ff7f0e"
    assert color("eagle-k4", 0) == "#2ca02c"
    assert color("eagle-k4", 1) == "#d62728"
    assert color("eagle-k4", 5) == "#d62728"  # the palette repeats after four


def _correctness_run() -> Summary:
    """Two levels: c4 with a baseline of unknown plan and no token accounting, acceptance without a rate or an
    agreement and no equivalence check; c8 measured by the baseline alone, its outputs compared as text."""
    c4 = LevelSummary(
        load=Load.parse("c4"),
        variants={
            "baseline": _variant(completed=10, errors=2, planned=None),
            "speculative": _variant(completed=11, errors=1, planned=12, token_sources={"usage": 9, "counted": 2},
                                    acceptance=Acceptance(source="stream", mean_accepted_length=2.5)),
        },
    )  # fmt: skip
    c8 = LevelSummary(
        load=Load.parse("c8"),
        variants={"baseline": _variant(completed=12, errors=0, planned=12, token_sources={"token_ids": 12})},
        equivalence=Equivalence(compared=12, matched=11, basis="text"),
    )
    return _summary([c4, c8])


def test_correctness_lines_of_a_run_without_plan_accounting_acceptance_rate_or_a_speculative_variant() -> None:
    assert correctness_lines(_correctness_run()) == [
        "[c4] baseline: 10 requests completed, 2 failed; token accounting: not recorded",
        "[c4] speculative: 11 of 12 requests completed, 1 failed; token accounting: counted (2), usage (9)",
        "[c4] acceptance: 2.50 tokens per step (from stream)",
        "[c4] output equivalence: not compared",
        "[c8] baseline: 12 of 12 requests completed, 0 failed; token accounting: token_ids (12)",
        "[c8] output equivalence: 11/12 greedy outputs identical (text)",
    ]


def test_a_run_without_a_cost_figure_has_no_price_line() -> None:
    assert price_line(_correctness_run()) is None


def test_headline_without_an_interval_has_no_verdict_and_without_a_cost_no_cost() -> None:
    # the class's baseline has no cost record: no cost; the declared mix takes the pooled variants
    open_ = ClassSummary(variants={"baseline": _variant(), "speculative": _variant(cost=_cost(20.0))})
    level = LevelSummary(
        load=Load.parse("c4"),
        variants={"baseline": _variant(cost=_cost(40.0)), "speculative": _variant(cost=_cost(16.0))},
        by_prompt_class={"open": open_},
    )
    headline = [
        HeadlineItem(level="c4", scope="open", speedup=Speedup(value=2.0, ci95=(1.9, 2.1))),
        HeadlineItem(level="c4", scope="mix", speedup=Speedup(value=1.5)),
    ]
    assert headline_lines(_summary([level], headline=headline)) == [
        "open: TPOT p50 speedup 2.00x [1.90, 2.10] (significant: faster)",
        "declared mix: TPOT p50 speedup 1.50x; $/M output tokens $40.00 -> $16.00",
    ]


def test_vllm_on_cpu_names_the_models_its_servers_served_or_a_tiny_offline_model() -> None:
    servers = {
        "baseline": ServerIdentity(model="tiny-llama"),
        "speculative": ServerIdentity(model="gpt2-tiny"),
        "draft": ServerIdentity(),
    }
    served = _summary([], provenance=Provenance(runtime="vllm-cpu", servers=servers))
    assert models_shown(served, "llama-8b", "llama-1b") == (
        "gpt2-tiny, tiny-llama (tiny model on vLLM on CPU; the configured llama-8b did not run)",
        "tiny draft model (the configured llama-1b did not run)",
    )
    unnamed = _summary([], provenance=Provenance(runtime="vllm-cpu"))
    assert models_shown(unnamed, "llama-8b", "llama-1b") == (
        "tiny offline model (tiny model on vLLM on CPU; the configured llama-8b did not run)",
        "tiny draft model (the configured llama-1b did not run)",
    )


def test_the_not_performance_banner_joins_every_reason() -> None:
    s = Summary(
        run_id="run-7",
        verdict=Verdict(clean=True, performance=False, reasons=["vLLM on CPU", "coalesced streams"]),
        levels=[],
    )
    assert not_performance_banner(s) == "NOT A PERFORMANCE RESULT: vLLM on CPU; coalesced streams"


def test_metric_text_of_a_missing_variant_or_a_metric_without_display_is_n_a() -> None:
    vs = _variant(tpot=0.025)
    tpot = _metric("TPOT")
    assert metric_text(vs, tpot) == "25.0"
    assert metric_text(vs, tpot, "p90") == "75.0"
    assert metric_text(None, tpot) == "n/a"
    assert metric_text(vs, _metric("OutputTokens")) == "n/a"


def test_metric_speedup_of_a_metric_without_a_reported_speedup_is_n_a() -> None:
    sp = Speedups(tpot_p50=Speedup(value=2.0, ci95=(1.9, 2.1)))
    assert metric_speedup(sp, _metric("TPOT")) == "2.00x [1.90, 2.10]"
    assert metric_speedup(sp, _metric("OutputTokens")) == "n/a"
    assert metric_speedup(None, _metric("TPOT")) == "n/a"


def test_speedup_of_a_missing_scope_or_an_uncomputed_speedup_is_none() -> None:
    tpot = Speedup(value=2.0, ci95=(1.9, 2.1))
    assert speedup_of(Speedups(tpot_p50=tpot), "tpot_p50") == tpot
    assert speedup_of(Speedups(tpot_p50=tpot), "cost") is None
    assert speedup_of(None, "tpot_p50") is None


def test_stat_reads_a_quantile_of_a_variant_distribution() -> None:
    vs = _variant(tpot=0.025)
    assert stat(vs, "tpot_s") == 0.025
    assert stat(vs, "e2e_s", "p90") == 5.0
    assert stat(vs, "llmperf_itl_s") is None  # a distribution without values
    assert stat(None, "tpot_s") is None


def test_usd_has_two_decimals_and_n_a_without_a_figure() -> None:
    assert usd(24.614) == "$24.61"
    assert usd(None) == "n/a"


def test_goodput_cells_without_slos_or_without_a_share() -> None:
    assert goodput_cells(None) == ("n/a", "n/a", "n/a")
    assert goodput_cells(_variant()) == ("n/a", "n/a", "n/a")
    g = Goodput(slos=["ttft<=2s"], requests_per_s=1.234, output_tokens_per_s=150.06)
    assert goodput_cells(_variant(goodput=g)) == ("1.23", "150.1", "n/a")


def test_slo_check_text_of_a_missing_variant_is_n_a() -> None:
    assert slo_check_text(None, "p90:tpot<=50ms") == "n/a"


def _slo_level(b: Goodput | None, s: Goodput | None) -> LevelSummary:
    return LevelSummary(
        load=Load.parse("c4"), variants={"baseline": _variant(goodput=b), "speculative": _variant(goodput=s)}
    )


def _check(observed_s: float, met: bool) -> SloCheck:
    return SloCheck(slo="p90:tpot<=50ms", metric="tpot", percentile=90, threshold_s=0.05, observed_s=observed_s,
                    met=met)  # fmt: skip


def test_slo_table_of_a_run_without_slos_is_none() -> None:
    assert slo_table(_slo_level(None, None)) is None
    assert slo_table(_slo_level(Goodput(), Goodput())) is None


def test_slo_table_with_per_request_slos_only() -> None:
    b = Goodput(slos=["ttft<=2s"], fraction=0.75, requests_per_s=1.234, output_tokens_per_s=150.06)
    s = Goodput(slos=["ttft<=2s"], requests_per_s=2.5, output_tokens_per_s=310.04)  # no share computed
    assert slo_table(_slo_level(b, s)) == (
        ["prompt class", "variant", "goodput req/s", "goodput tok/s", "within ttft<=2s"],
        [
            ["all (pooled)", "baseline", "1.23", "150.1", "75%"],
            ["all (pooled)", "speculative", "2.50", "310.0", "n/a"],
        ],
    )


def test_slo_table_with_percentile_slos_only() -> None:
    b, s = Goodput(checks=[_check(0.05321, False)]), Goodput(checks=[_check(0.02011, True)])
    assert slo_table(_slo_level(b, s)) == (
        ["prompt class", "variant", "goodput req/s", "goodput tok/s", "within (no per-request SLO)", "p90:tpot<=50ms"],
        [
            ["all (pooled)", "baseline", "n/a", "n/a", "n/a", "53.2 ms MISSED"],
            ["all (pooled)", "speculative", "n/a", "n/a", "n/a", "20.1 ms met"],
        ],
    )
