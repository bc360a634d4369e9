"""summary.md as a whole: every line, blank line and sentence of the Markdown, for a performance run (setup from
the config, SLOs, a price, acceptance that stream and counters agree on, warnings with Markdown characters in them)
and for a run that is no performance result (two load levels, servers that name neither draft nor window, each
service's scheduling mode, a prompt class and a level measured by the baseline alone, without a price). Every
expected line is written out here from the summaries' own numbers."""

from __future__ import annotations

from doubles.summaries import variant as _variant
from spectrn.configuration.config import SpectrnConfig
from spectrn.report.markdown import summary_markdown
from spectrn.run.summary import (
    Acceptance,
    ClassSummary,
    Cost,
    Equivalence,
    Finding,
    Goodput,
    HeadlineItem,
    LevelSummary,
    Load,
    Provenance,
    ServerIdentity,
    SloCheck,
    Speedup,
    Speedups,
    Summary,
    Verdict,
)

HEADER = (
    "| prompt class | TPOT p50 ms (base → spec) | speedup | ITL p50 ms | speedup | e2e p50 s | speedup | "
    "tok/s/req p50 | speedup | acceptance (tokens/step) | $/M tokens (base → spec) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|\n"
)
FOOTNOTE = (
    "_TPOT = (e2e − TTFT)/(tokens − 1); per-token ITL splits multi-token chunks; speedup = baseline / speculative "
    "(throughput: speculative / baseline); 95 % bootstrap CIs; 'all (pooled)' mixes prompt classes and is not a "
    "headline._\n"
)


def _cost(usd: float) -> Cost:
    return Cost(instance_hourly_usd=4.5, instances_per_service=0.5, usd_per_million_output_tokens=usd,
                price_source="pricing.instance_hourly_usd")  # fmt: skip


def _goodput(fraction: float, rps: float, tps: float, observed_s: float, met: bool) -> Goodput:
    return Goodput(
        slos=["ttft<=2s"], fraction=fraction, requests_per_s=rps, output_tokens_per_s=tps,
        checks=[SloCheck(slo="p90:tpot<=50ms", metric="tpot", percentile=90, threshold_s=0.05, observed_s=observed_s,
                         met=met)],
    )  # fmt: skip


def _performance_run() -> Summary:
    """One level, one prompt class; the pooled scope holds the same two variants under another speedup."""
    b = _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12, cost=_cost(50.0),
                 goodput=_goodput(0.8125, 1.234, 150.06, 0.05321, False))  # fmt: skip
    s = _variant(0.1507, 0.01666, 0.01712, 2.468, 58.76, cost=_cost(20.0),
                 goodput=_goodput(0.9375, 2.468, 330.12, 0.02011, True),
                 acceptance=Acceptance(source="stream", rate=0.5, mean_accepted_length=2.5,
                                       agreement="stream and counters agree"))  # fmt: skip
    tpot = Speedup(value=2.0, ci95=(1.9, 2.1))
    level = LevelSummary(
        load=Load.parse("c4"), variants={"baseline": b, "speculative": s},
        speedup=Speedups(tpot_p50=Speedup(value=2.5, ci95=(2.4, 2.6)), e2e_p50=Speedup(value=1.75, ci95=(1.7, 1.8))),
        by_prompt_class={"open": ClassSummary(variants={"baseline": b, "speculative": s},
                                              speedup=Speedups(tpot_p50=tpot))},
    )  # fmt: skip
    findings = [
        Finding(code="error_rate", severity="error", message="2 of 12 requests failed"),
        Finding(code="aside", severity="note", message="a note is no warning"),
        Finding(code="server_text", severity="warning", message="the server said a\\b | *x* _y_ `z`"),
    ]
    return Summary(run_id="run-9", provenance=Provenance(runtime="sim", started_by_spectrn=True),
                   verdict=Verdict(clean=False, performance=True), findings=findings,
                   headline=[HeadlineItem(level="c4", scope="open", speedup=tpot)], levels=[level])  # fmt: skip


def test_markdown_of_a_performance_run_line_by_line() -> None:
    md = summary_markdown(_performance_run(), SpectrnConfig())
    expected = (
        "### spectrn run `run-9`\n"
        "\n"
        # draft and window from the config: nothing after either; no ignore_eos given: no output lengths
        "target `qwen3-32b`, draft `qwen3-1.7b`, window 7, mode fused, trn2.48xlarge TP32, prompts structured, "
        "max_tokens 600, temperature 0.0\n"
        "runtime sim (servers started by spectrn)\n"
        "\n"
        "**NOT A CLEAN RUN**\n"
        "\n"
        "- open: TPOT p50 speedup 2.00x [1.90, 2.10] (significant: faster); $/M output tokens $50.00 -> $20.00\n"
        "\n"
        + HEADER
        # TPOT 0.03333 s -> 33.3 ms, 0.01666 -> 16.7; ITL 32.1, 17.1; e2e 4.32, 2.47 s; 30.12, 58.76 tok/s
        + "| open | 33.3 → 16.7 | 2.00x [1.90, 2.10] | 32.1 → 17.1 | n/a | 4.32 → 2.47 | n/a | 30.1 → 58.8 | n/a | "
        "2.50 (stream) | $50.00 → $20.00 |\n"
        "| all (pooled) | 33.3 → 16.7 | 2.50x [2.40, 2.60] | 32.1 → 17.1 | n/a | 4.32 → 2.47 | 1.75x [1.70, 1.80] | "
        "30.1 → 58.8 | n/a | 2.50 (stream) | $50.00 → $20.00 |\n"
        "\n"
        "**SLOs and goodput**\n"
        "\n"
        "| prompt class | variant | goodput req/s | goodput tok/s | within ttft<=2s | p90:tpot<=50ms |\n"
        "|---|---|---|---|---|---|\n"
        # 0.8125 -> 81 %, 0.9375 -> 94 %; p90 TPOT 53.21 ms over its 50 ms limit, 20.11 ms within
        "| open | baseline | 1.23 | 150.1 | 81% | 53.2 ms MISSED |\n"
        "| open | speculative | 2.47 | 330.1 | 94% | 20.1 ms met |\n"
        "| all (pooled) | baseline | 1.23 | 150.1 | 81% | 53.2 ms MISSED |\n"
        "| all (pooled) | speculative | 2.47 | 330.1 | 94% | 20.1 ms met |\n"
        "\n"
        "_goodput = completed requests meeting every per-request SLO of their prompt class (and their output tokens) "
        "per second of the scope's wall time, as aggregate throughput; a percentile SLO is met when the observed "
        "percentile is at most its limit (docs/slo.md)._\n"
        "\n"
        # one prompt class: no word on billing shares; the price source's underscores escaped
        "$/M tokens at pricing.instance\\_hourly\\_usd x 0.5 instance per service\n"
        "\n"
        "acceptance: stream and counters agree\n"
        "\n"
        "**Warnings**\n"
        "- NOT A CLEAN RUN: 2 of 12 requests failed\n"
        # the note is left out; backslash, pipe, stars and underscores escaped, backticks made quotes
        "- the server said a\\\\b \\| \\*x\\* \\_y\\_ 'z'\n"
        "\n" + FOOTNOTE
    )
    assert md == expected


def _baseline_only_level(label: str) -> LevelSummary:
    """A level (and its one prompt class) measured by the baseline alone, without a cost."""
    b = _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12)
    return LevelSummary(load=Load.parse(label), variants={"baseline": b},
                        by_prompt_class={"open": ClassSummary(variants={"baseline": b})})  # fmt: skip


def _two_variant_level(label: str) -> LevelSummary:
    b = _variant(0.1523, 0.04012, 0.03876, 5.012, 25.43)
    s = _variant(0.1302, 0.01601, 0.01634, 2.234, 61.87,
                 acceptance=Acceptance(source="counters", rate=0.6149, mean_accepted_length=3.456))  # fmt: skip
    sp = Speedups(tpot_p50=Speedup(value=2.5, ci95=(0.9, 3.1)))
    return LevelSummary(
        load=Load.parse(label), variants={"baseline": b, "speculative": s}, speedup=sp,
        by_prompt_class={"open": ClassSummary(variants={"baseline": b, "speculative": s}, speedup=sp)},
        equivalence=Equivalence(compared=8, matched=7, basis="token_ids"),
    )  # fmt: skip


def _no_performance_run() -> Summary:
    servers = {
        "baseline": ServerIdentity(scheduling="sync (--no-async-scheduling)"),
        # the speculative server answered but named neither its draft nor its window
        "speculative": ServerIdentity(source="server", scheduling="async/sync (server default)"),
    }
    return Summary(run_id="run-3", provenance=Provenance(runtime="sim", servers=servers),
                   verdict=Verdict(clean=True, performance=False, reasons=["too few events", "coalesced streams"]),
                   levels=[_baseline_only_level("c4"), _two_variant_level("c8")])  # fmt: skip


def test_markdown_of_a_run_that_is_no_performance_result_line_by_line() -> None:
    md = summary_markdown(_no_performance_run(), SpectrnConfig(), ignore_eos=False)
    expected = (
        "### spectrn run `run-3`\n"
        "\n"
        "target `qwen3-32b`, draft `unknown` (the server did not say), window unknown (the server did not say), "
        "mode fused, trn2.48xlarge TP32, prompts structured, max_tokens 600, temperature 0.0, output lengths "
        "natural: each request ends at end-of-sequence, at most its max_tokens\n"
        "scheduling: baseline sync (--no-async-scheduling), speculative async/sync (server default)\n"
        "**NOT A PERFORMANCE RESULT: too few events; coalesced streams**\n"
        "\n"
        "runtime sim\n"
        "\n"
        "**clean run; NOT A PERFORMANCE RESULT (too few events; coalesced streams)**\n"
        "\n"
        "Correctness (the timings below are not performance figures):\n"
        "\n"
        # two levels: each line names its level; token sources sorted by name
        "- [c4] baseline: 10 of 12 requests completed, 2 failed; token accounting: counted (1), usage (9)\n"
        "- [c4] output equivalence: not compared\n"
        "- [c8] baseline: 10 of 12 requests completed, 2 failed; token accounting: counted (1), usage (9)\n"
        "- [c8] speculative: 10 of 12 requests completed, 2 failed; token accounting: counted (1), usage (9)\n"
        # 3.456 -> 3.46 tokens per step, 0.6149 -> 61 %
        "- [c8] acceptance: 3.46 tokens per step, 61% of drafted tokens accepted (from counters)\n"
        "- [c8] output equivalence: 7/8 greedy outputs identical (token\\_ids)\n"
        "\n"
        "#### load c4\n"
        "\n"
        + HEADER
        # no speculative variant, no cost, no speedup: n/a on that side and for every ratio
        + "| open | 33.3 → n/a | n/a | 32.1 → n/a | n/a | 4.32 → n/a | n/a | 30.1 → n/a | n/a | not reported | "
        "n/a → n/a |\n"
        "| all (pooled) | 33.3 → n/a | n/a | 32.1 → n/a | n/a | 4.32 → n/a | n/a | 30.1 → n/a | n/a | not reported | "
        "n/a → n/a |\n"
        "\n"
        "#### load c8\n"
        "\n"
        + HEADER
        # TPOT 0.04012 s -> 40.1 ms, 0.01601 -> 16.0; ITL 38.8, 16.3; e2e 5.01, 2.23 s; 25.43, 61.87 tok/s
        + "| open | 40.1 → 16.0 | 2.50x [0.90, 3.10] | 38.8 → 16.3 | n/a | 5.01 → 2.23 | n/a | 25.4 → 61.9 | n/a | "
        "3.46 (counters) | n/a → n/a |\n"
        "| all (pooled) | 40.1 → 16.0 | 2.50x [0.90, 3.10] | 38.8 → 16.3 | n/a | 5.01 → 2.23 | n/a | 25.4 → 61.9 | "
        "n/a | 3.46 (counters) | n/a → n/a |\n"
        "\n" + FOOTNOTE
    )
    assert md == expected
