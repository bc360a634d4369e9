"""Every cell of the terminal table and of summary.md, and every sentence around them, checked against a summary
built here by hand: each expected string is worked out from the summary's own numbers (units, digits, which
variant is which, the direction of each ratio), so a slip in formatting, order or direction shows as a wrong cell.
"""

from __future__ import annotations

from typing import Any

from doubles.summaries import PRICE
from doubles.summaries import variant as _variant
from spectrn.configuration.config import SpectrnConfig
from spectrn.report.format import (
    correctness_lines,
    goodput_cells,
    headline_lines,
    models_shown,
    num,
    output_lengths_text,
    price_line,
    provenance_line,
    slo_table,
    slo_verdict,
    verdict_line,
)
from spectrn.report.html import TPOT_VS_ITL, _comparison_rows, _variant_rows, tpot_itl_notes
from spectrn.report.markdown import summary_markdown
from spectrn.report.tables import render_table
from spectrn.run.summary import (
    Acceptance,
    ClassSummary,
    Equivalence,
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
    VariantSummary,
    Verdict,
)


def _sp(value: float, lo: float, hi: float) -> Speedup:
    return Speedup(value=value, ci95=(lo, hi))


GOODPUT_B = Goodput(
    slos=["ttft<=2s", "tpot<=50ms"], fraction=0.8125, requests_per_s=1.234, output_tokens_per_s=150.06,
    checks=[SloCheck(slo="p90:tpot<=50ms", metric="tpot", percentile=90, threshold_s=0.05, observed_s=0.05321,
                     met=False)],
)  # fmt: skip
GOODPUT_S = Goodput(
    slos=["ttft<=2s", "tpot<=50ms"], fraction=0.9375, requests_per_s=2.468, output_tokens_per_s=330.12,
    checks=[
        SloCheck(slo="p90:tpot<=50ms", metric="tpot", percentile=90, threshold_s=0.05, observed_s=0.02011, met=True),
        SloCheck(slo="p99:ttft<=1s", metric="ttft", percentile=99, threshold_s=1.0, observed_s=None, met=None),
    ],
)  # fmt: skip
ACC = Acceptance(source="counters", rate=0.6149, mean_accepted_length=3.456, agreement="stream and counters agree")


def _structured() -> ClassSummary:
    """Goodput and SLO checks, acceptance, cost with its paired cost speedup."""
    return ClassSummary(
        variants={
            "baseline": _variant(0.1234, 0.04567, 0.04321, 5.678, 21.9, usd=69.52, goodput=GOODPUT_B),
            "speculative": _variant(0.1111, 0.01523, 0.01549, 1.987, 65.43, usd=24.61, goodput=GOODPUT_S,
                                    acceptance=ACC),
        },
        speedup=Speedups(
            ttft_p50=_sp(1.11, 1.02, 1.2), tpot_p50=_sp(3.0, 2.9, 3.1), itl_p50=_sp(2.79, 2.7, 2.88),
            e2e_p50=_sp(2.86, 2.8, 2.92), throughput=_sp(2.99, 2.95, 3.03), aggregate_throughput=_sp(2.5, 2.4, 2.6),
            cost=_sp(2.45, 2.35, 2.55),
        ),
    )  # fmt: skip


def _open() -> ClassSummary:
    """Cost but no cost speedup: the $/M row falls back to the aggregate throughput speedup (one price)."""
    return ClassSummary(
        variants={
            "baseline": _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12, usd=50.0),
            "speculative": _variant(0.1507, 0.01666, 0.01712, 2.468, 58.76, usd=20.0),
        },
        speedup=Speedups(tpot_p50=_sp(2.0, 1.9, 2.1), aggregate_throughput=_sp(2.4, 2.3, 2.5)),
    )


def _pooled_variants() -> dict[str, VariantSummary]:
    return {
        "baseline": _variant(0.1523, 0.04012, 0.03876, 5.012, 25.43, usd=69.0),
        "speculative": _variant(0.1302, 0.01601, 0.01634, 2.234, 61.87, usd=23.0),
    }


def _level(label: str) -> LevelSummary:
    """Pooled: cost without any paired speedup (the ratio is then baseline $/M over speculative $/M)."""
    return LevelSummary(
        load=Load.parse(label),
        variants=_pooled_variants(),
        speedup=Speedups(tpot_p50=_sp(2.5, 2.4, 2.6)),
        by_prompt_class={"structured": _structured(), "open": _open()},
        equivalence=Equivalence(compared=8, matched=7),
    )


def _summary(*labels: str, performance: bool = True) -> Summary:
    return Summary(
        run_id="run-7",
        config_label="llama-8b k4",
        verdict=Verdict(clean=True, performance=performance, reasons=[] if performance else ["vLLM on CPU"]),
        headline=[
            HeadlineItem(level=labels[0], scope="structured", speedup=_sp(3.0, 2.9, 3.1)),
            HeadlineItem(level=labels[0], scope="mix", speedup=_sp(2.0, 0.9, 3.1)),
        ],
        levels=[_level(x) for x in labels],
    )


def _rows(table: Any) -> list[list[str]]:
    columns = [[str(c) for c in col._cells] for col in table.columns]
    return [list(r) for r in zip(*columns, strict=True)]


# the rows of one level, worked out from the numbers above: latencies in ms with one decimal (TTFT 0.1234 s ->
# 123.4), e2e in s with two, tok/s with one; speedups as given; acceptance 3.456 -> 3.46, rate 0.6149 -> 61%
OPEN_ROWS = [
    ["open", "TTFT ms", "201.2", "150.7", "n/a"],
    ["", "TPOT ms", "33.3", "16.7", "2.00x [1.90, 2.10]"],
    ["", "ITL ms", "32.1", "17.1", "n/a"],
    ["", "e2e s", "4.32", "2.47", "n/a"],
    ["", "tok/s/req", "30.1", "58.8", "n/a"],
    # no cost speedup: the aggregate throughput speedup is the cost ratio (one price)
    ["", "$/M tokens", "$50.00", "$20.00", "2.40x [2.30, 2.50]"],
]
STRUCTURED_ROWS = [
    ["structured", "TTFT ms", "123.4", "111.1", "1.11x [1.02, 1.20]"],
    ["", "TPOT ms", "45.7", "15.2", "3.00x [2.90, 3.10]"],
    ["", "ITL ms", "43.2", "15.5", "2.79x [2.70, 2.88]"],
    ["", "e2e s", "5.68", "1.99", "2.86x [2.80, 2.92]"],
    ["", "tok/s/req", "21.9", "65.4", "2.99x [2.95, 3.03]"],
    ["", "acceptance", "", "3.46 tok/step, 61% (counters)", ""],
    ["", "$/M tokens", "$69.52", "$24.61", "2.45x [2.35, 2.55]"],
    # goodput speculative / baseline: 2.468 / 1.234 = 2.00, 330.12 / 150.06 = 2.1999 -> 2.20
    ["", "goodput req/s", "1.23", "2.47", "2.00x"],
    ["", "goodput tok/s", "150.1", "330.1", "2.20x"],
    ["", "within SLO", "81%", "94%", ""],  # 0.8125 -> 81%, 0.9375 -> 94%
    ["", "p90:tpot<=50ms", "53.2 ms MISSED", "20.1 ms met", ""],
    ["", "p99:ttft<=1s", "n/a", "no value not judged", ""],
]
POOLED_ROWS = [
    ["all (pooled)", "TTFT ms", "152.3", "130.2", "n/a"],
    ["", "TPOT ms", "40.1", "16.0", "2.50x [2.40, 2.60]"],
    ["", "ITL ms", "38.8", "16.3", "n/a"],
    ["", "e2e s", "5.01", "2.23", "n/a"],
    ["", "tok/s/req", "25.4", "61.9", "n/a"],
    ["", "$/M tokens", "$69.00", "$23.00", "3.00x"],  # no paired ratio: 69.00 / 23.00 = 3.00 (baseline / spec)
]


def test_terminal_table_has_every_cell_of_every_class_classes_first_pooled_last() -> None:
    table = render_table(_summary("c4"))
    assert str(table.title) == ("spectrn run-7 (llama-8b k4) at c4: baseline vs speculative (p50; speedup with 95% CI)")
    assert [c.header for c in table.columns] == ["prompt class", "metric", "baseline", "speculative",
                                                 "speedup [95% CI]"]  # fmt: skip
    assert _rows(table) == OPEN_ROWS + STRUCTURED_ROWS + POOLED_ROWS


def test_terminal_table_of_several_levels_names_each_level_once_on_its_first_row() -> None:
    table = render_table(_summary("c4", "c8"))
    assert str(table.title) == "spectrn run-7 (llama-8b k4): baseline vs speculative (p50; speedup with 95% CI)"
    assert [c.header for c in table.columns][:2] == ["load", "prompt class"]
    rows = _rows(table)
    per_level = len(OPEN_ROWS + STRUCTURED_ROWS + POOLED_ROWS)
    assert [r[0] for r in rows] == ["c4"] + [""] * (per_level - 1) + ["c8"] + [""] * (per_level - 1)
    assert [r[1:] for r in rows[:per_level]] == OPEN_ROWS + STRUCTURED_ROWS + POOLED_ROWS


def test_markdown_table_shows_base_then_spec_and_each_speedup_in_its_column() -> None:
    md = summary_markdown(_summary("c4")).splitlines()
    header = (
        "| prompt class | TPOT p50 ms (base → spec) | speedup | ITL p50 ms | speedup | e2e p50 s | speedup | "
        "tok/s/req p50 | speedup | acceptance (tokens/step) | $/M tokens (base → spec) |"
    )
    at = md.index(header)
    assert md[at + 1] == "|---|---|---|---|---|---|---|---|---|---|---|"
    assert md[at + 2 : at + 5] == [
        "| open | 33.3 → 16.7 | 2.00x [1.90, 2.10] | 32.1 → 17.1 | n/a | 4.32 → 2.47 | n/a | 30.1 → 58.8 | n/a | "
        "not reported | $50.00 → $20.00 |",
        "| structured | 45.7 → 15.2 | 3.00x [2.90, 3.10] | 43.2 → 15.5 | 2.79x [2.70, 2.88] | 5.68 → 1.99 | "
        "2.86x [2.80, 2.92] | 21.9 → 65.4 | 2.99x [2.95, 3.03] | 3.46 (counters) | $69.52 → $24.61 |",
        "| all (pooled) | 40.1 → 16.0 | 2.50x [2.40, 2.60] | 38.8 → 16.3 | n/a | 5.01 → 2.23 | n/a | 25.4 → 61.9 | "
        "n/a | not reported | $69.00 → $23.00 |",
    ]
    assert "#### load" not in "\n".join(md)  # one level: no level headings


def test_markdown_of_a_performance_run_lists_the_headline_and_slo_rows() -> None:
    md = summary_markdown(_summary("c4")).splitlines()
    assert md[:2] == ["### spectrn run `run-7`", ""]
    assert "- structured: TPOT p50 speedup 3.00x [2.90, 3.10] (significant: faster); $/M output tokens $69.52 -> " \
           "$24.61" in md  # fmt: skip
    assert "Correctness (the timings below are not performance figures):" not in md
    at = md.index("**SLOs and goodput**")
    assert md[at + 2 : at + 10] == [
        "| prompt class | variant | goodput req/s | goodput tok/s | within ttft<=2s, tpot<=50ms | p90:tpot<=50ms | "
        "p99:ttft<=1s |",
        "|---|---|---|---|---|---|---|",
        "| open | baseline | n/a | n/a | n/a | n/a | n/a |",
        "| open | speculative | n/a | n/a | n/a | n/a | n/a |",
        "| structured | baseline | 1.23 | 150.1 | 81% | 53.2 ms MISSED | n/a |",
        "| structured | speculative | 2.47 | 330.1 | 94% | 20.1 ms met | no value not judged |",
        "| all (pooled) | baseline | n/a | n/a | n/a | n/a | n/a |",
        "| all (pooled) | speculative | n/a | n/a | n/a | n/a | n/a |",
    ]


def test_markdown_of_several_levels_heads_each_level_and_quotes_the_agreement() -> None:
    s = _summary("c4", "c8")
    s.levels[0].variants["speculative"].acceptance = ACC
    md = summary_markdown(s).splitlines()
    assert [x for x in md if x.startswith("#### load")] == ["#### load c4", "#### load c8"]
    assert md.count("acceptance: stream and counters agree") == 1  # only c4's pooled speculative has counters
    assert "- [c4] structured: TPOT p50 speedup 3.00x [2.90, 3.10] (significant: faster); $/M output tokens " \
           "$69.52 -> $24.61" in md  # fmt: skip


def test_markdown_of_a_run_that_is_no_performance_result_leads_with_correctness() -> None:
    md = summary_markdown(_summary("c4", performance=False)).splitlines()
    assert "**NOT A PERFORMANCE RESULT: vLLM on CPU**" in md
    assert "**clean run; NOT A PERFORMANCE RESULT (vLLM on CPU)**" in md
    assert not any("TPOT p50 speedup" in x for x in md)  # no headline speedups
    assert "- output equivalence: 7/8 greedy outputs identical (token\\_ids)" in md


def test_headline_names_the_declared_mix_and_costs_it_from_the_pooled_variants() -> None:
    assert headline_lines(_summary("c4")) == [
        "structured: TPOT p50 speedup 3.00x [2.90, 3.10] (significant: faster); $/M output tokens $69.52 -> $24.61",
        "declared mix: TPOT p50 speedup 2.00x [0.90, 3.10] (not significant: the CI includes 1.0); "
        "$/M output tokens $69.00 -> $23.00",
    ]


def test_correctness_lines_count_completed_and_failed_requests_and_matched_outputs() -> None:
    s = _summary("c4", performance=False)
    s.levels[0].variants["speculative"].acceptance = ACC
    assert correctness_lines(s) == [
        "baseline: 10 of 12 requests completed, 2 failed; token accounting: counted (1), usage (9)",
        "speculative: 10 of 12 requests completed, 2 failed; token accounting: counted (1), usage (9)",
        # rate 0.6149 -> 61%
        "acceptance: 3.46 tokens per step, 61% of drafted tokens accepted (from counters); stream and counters agree",
        "output equivalence: 7/8 greedy outputs identical (token_ids)",
    ]


def test_correctness_lines_say_what_was_not_measured() -> None:
    s = _summary("c4", "c8", performance=False)
    s.levels[1].equivalence = None
    lines = correctness_lines(s)
    assert "[c4] acceptance: not reported" in lines and "[c8] acceptance: not reported" in lines
    assert "[c4] output equivalence: 7/8 greedy outputs identical (token_ids)" in lines
    assert "[c8] output equivalence: not compared" in lines


def test_provenance_line_names_runtime_profile_time_scale_engine_and_shape() -> None:
    s = _summary("c4")
    s.provenance = Provenance(runtime="sim", started_by_spectrn=True, profile="neuron-fork", time_scale=10.0,
                              rescaled=True, engine="llmperf", load_shape="ramp")  # fmt: skip
    assert provenance_line(s) == (
        "runtime sim (servers started by spectrn); server profile neuron-fork; simulated at time scale 10: figures "
        "rescaled to real time; load generator llmperf; load shape: ramp"
    )
    s.provenance = Provenance(runtime="sim", time_scale=0.5, rescaled=False)
    assert provenance_line(s) == "runtime sim; simulated at time scale 0.5: figures are SCALED, not real time"
    s.provenance = Provenance(runtime="endpoints")
    assert provenance_line(s) == (
        "runtime endpoints; figures in the servers' own time (simulators run at a time scale: pass it as --time-scale)"
    )
    s.provenance = Provenance(runtime="cluster")
    assert provenance_line(s) == "runtime cluster"


def test_price_line_names_the_price_the_share_per_service_and_the_class_billing() -> None:
    s = _summary("c4")
    assert price_line(s) == (
        f"$/M tokens at {PRICE} x 0.5 instance per service; a prompt class is billed its share of the level's time "
        "by decode slot-seconds"
    )
    s.levels[0].by_prompt_class.pop("open")  # one class: nothing is shared out
    assert price_line(s) == f"$/M tokens at {PRICE} x 0.5 instance per service"


def test_slo_verdicts_and_goodput_cells() -> None:
    assert [slo_verdict(x) for x in (True, False, None)] == ["met", "MISSED", "not judged"]
    assert goodput_cells(_structured().variants["baseline"]) == ("1.23", "150.1", "81%")
    assert goodput_cells(None) == ("n/a", "n/a", "n/a")


def test_a_figure_that_is_not_finite_reads_n_a() -> None:
    assert [num(x) for x in (float("inf"), float("nan"), None)] == ["n/a", "n/a", "n/a"]
    assert num(0.04567, 1e3, 1) == "45.7"


def test_slo_table_lists_each_class_and_variant_with_every_check() -> None:
    table = slo_table(_level("c4"))
    assert table is not None
    header, rows = table
    assert header == ["prompt class", "variant", "goodput req/s", "goodput tok/s", "within ttft<=2s, tpot<=50ms",
                      "p90:tpot<=50ms", "p99:ttft<=1s"]  # fmt: skip
    assert rows[2:4] == [
        ["structured", "baseline", "1.23", "150.1", "81%", "53.2 ms MISSED", "n/a"],
        ["structured", "speculative", "2.47", "330.1", "94%", "20.1 ms met", "no value not judged"],
    ]


def test_output_lengths_and_verdict_words() -> None:
    assert output_lengths_text(True) == "fixed: every request exactly its max_tokens (ignore_eos)"
    assert output_lengths_text(False) == "natural: each request ends at end-of-sequence, at most its max_tokens"
    assert output_lengths_text(None) == "not recorded"
    s = _summary("c4")
    assert verdict_line(s) == "clean run"
    s.verdict = Verdict(clean=False, performance=False, reasons=["coalesced streams", "too few events"])
    assert verdict_line(s) == "NOT A CLEAN RUN; NOT A PERFORMANCE RESULT (coalesced streams; too few events)"


def test_models_shown_names_the_tiny_models_only_on_vllm_on_cpu() -> None:
    s = _summary("c4")
    s.provenance = Provenance(runtime="cluster")
    assert models_shown(s, "meta/llama-8b", "meta/llama-1b") == ("meta/llama-8b", "meta/llama-1b")
    s.provenance = Provenance(runtime="vllm-cpu", servers={"baseline": ServerIdentity(model="tiny-gpt")})
    assert models_shown(s, "meta/llama-8b", "meta/llama-1b") == (
        "tiny-gpt (tiny model on vLLM on CPU; the configured meta/llama-8b did not run)",
        "tiny draft model (the configured meta/llama-1b did not run)",
    )


# ---- the HTML report's tables ------------------------------------------------------------------------------------


def test_html_comparison_rows_give_p50_p90_p99_of_each_variant_then_the_speedup() -> None:
    rows = _comparison_rows(_level("c4"))
    structured = [r for r in rows if r[0] == "structured"]
    assert structured[:2] == [
        # TTFT 0.1234 s: p50 123.4, p90 x3 = 370.2, p99 x4 = 493.6 ms; speculative 0.1111 s: 111.1, 333.3, 444.4
        ["structured", "TTFT (ms)", "123.4", "370.2", "493.6", "111.1", "333.3", "444.4", "1.11x [1.02, 1.20]"],
        # TPOT 0.04567 s: 45.7, 137.0, 182.7 ms; speculative 0.01523 s: 15.2, 45.7, 60.9
        ["structured", "TPOT (ms)", "45.7", "137.0", "182.7", "15.2", "45.7", "60.9", "3.00x [2.90, 3.10]"],
    ]
    assert [r[0] for r in rows] == ["open"] * 5 + ["structured"] * 5 + ["all (pooled)"] * 5


def test_html_variant_rows_give_requests_errors_acceptance_throughput_and_cost() -> None:
    lv = _level("c4")
    lv.by_prompt_class["structured"].variants["baseline"].requests.error_classes = {"timeout": 2}
    rows = [r for r in _variant_rows(lv) if r[0] == "structured"]
    assert rows == [
        # aggregate tok/s = 4 x the per-request median here: 21.9 x 4 = 87.6
        ["structured", "baseline", "10 of 12", "2", "timeout: 2", "n/a", "-", "-", "-", "87.6", "$69.52"],
        # acceptance rate 0.6149 -> 61.5 %, 3.456 tokens/step -> 3.46; 65.43 x 4 = 261.72 -> 261.7
        ["structured", "speculative", "10 of 12", "2", "-", "n/a", "61.5%", "3.46", "counters", "261.7", "$24.61"],
    ]


def test_tpot_itl_note_only_where_the_two_speedups_point_different_ways() -> None:
    lv = _level("c4")
    lv.by_prompt_class["open"].speedup = Speedups(tpot_p50=_sp(0.95, 0.9, 1.0), itl_p50=_sp(1.2, 1.1, 1.3))
    # structured: 3.00x and 2.79x, both faster: no note
    assert tpot_itl_notes(lv) == [f"open: TPOT 0.95x but per-token ITL 1.20x. {TPOT_VS_ITL}"]
    # a TPOT speedup of exactly 1 points nowhere: no note
    lv.by_prompt_class["open"].speedup = Speedups(tpot_p50=_sp(1.0, 0.9, 1.1), itl_p50=_sp(1.2, 1.1, 1.3))
    assert tpot_itl_notes(lv) == []


def test_markdown_setup_line_says_which_values_the_server_gave() -> None:
    s = _summary("c4")
    cfg = SpectrnConfig()  # qwen3-32b, draft qwen3-1.7b, window 7, fused, trn2.48xlarge TP32
    s.provenance = Provenance(servers={"speculative": ServerIdentity(source="server", draft="qwen3-0.6b", window=5)})
    md = summary_markdown(s, cfg, ignore_eos=True).splitlines()
    assert md[2] == (
        "target `qwen3-32b`, draft `qwen3-0.6b` (from the server), window 5 (from the server), mode fused, "
        "trn2.48xlarge TP32, prompts structured, max_tokens 600, temperature 0.0, output lengths fixed: every "
        "request exactly its max_tokens (ignore_eos)"
    )
    # a server that names no window: the config's is not put in its place
    s.provenance = Provenance(servers={"speculative": ServerIdentity(source="server", draft="qwen3-0.6b")})
    assert "window unknown (the server did not say)" in summary_markdown(s, cfg).splitlines()[2]
