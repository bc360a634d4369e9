"""The terminal comparison table where a scope lacks something: a prompt class measured by one variant only, a
run without a price or without SLOs, acceptance without a rate, a goodput of zero; and the table as a terminal
shows it (right-aligned figures, a rule after each prompt class, one line per row however narrow the terminal).
Every expected cell and line is written out here from the summaries' own numbers."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from doubles.summaries import variant as _variant
from spectrn.cli.show import print_table
from spectrn.report.tables import render_table
from spectrn.run.summary import (
    Acceptance,
    ClassSummary,
    Cost,
    Goodput,
    LevelSummary,
    Load,
    SloCheck,
    Speedup,
    Speedups,
    Summary,
    VariantSummary,
    Verdict,
)


def _cost(usd: float) -> Cost:
    return Cost(instance_hourly_usd=4.5, instances_per_service=0.5, usd_per_million_output_tokens=usd)


def _goodput(rps: float, tps: float, fraction: float) -> Goodput:
    return Goodput(
        slos=["ttft<=2s"], fraction=fraction, requests_per_s=rps, output_tokens_per_s=tps,
        checks=[SloCheck(slo="p90:ttft<=1s", metric="ttft", percentile=90, threshold_s=1.0, observed_s=0.4321,
                         met=True)],
    )  # fmt: skip


def _summary(classes: dict[str, ClassSummary], pooled: dict[str, VariantSummary], speedup: Speedups | None) -> Summary:
    level = LevelSummary(load=Load.parse("c4"), variants=pooled, speedup=speedup, by_prompt_class=classes)
    return Summary(run_id="run-7", config_label="llama-8b k4", verdict=Verdict(clean=True, performance=True),
                   levels=[level])  # fmt: skip


def _rows(table: Any) -> list[list[str]]:
    columns = [[str(c) for c in col._cells] for col in table.columns]
    return [list(r) for r in zip(*columns, strict=True)]


def _shown(summary: Summary, width: int) -> str:
    """The table as ``spectrn show`` prints it, on a terminal ``width`` columns wide without colours."""
    out = io.StringIO()
    print_table(Console(file=out, width=width, color_system=None), render_table(summary))
    return out.getvalue()


def _plain() -> Summary:
    """No price, no SLO, no acceptance: one prompt class and the pooled scope, five metric rows each."""
    tpot = Speedups(tpot_p50=Speedup(value=2.0, ci95=(1.9, 2.1)))
    b, s = _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12), _variant(0.1507, 0.01666, 0.01712, 2.468, 58.76)
    pb, ps = _variant(0.1523, 0.04012, 0.03876, 5.012, 25.43), _variant(0.1302, 0.01601, 0.01634, 2.234, 61.87)
    classes = {"open": ClassSummary(variants={"baseline": b, "speculative": s}, speedup=tpot)}
    return _summary(classes, {"baseline": pb, "speculative": ps}, tpot)


def test_the_terminal_shows_figures_right_aligned_and_a_rule_after_each_prompt_class() -> None:
    # no price anywhere: no $/M row at all; latencies in ms with one decimal, e2e in s with two, tok/s with one
    assert _shown(_plain(), 100) == (
        "spectrn run-7 (llama-8b k4) at c4: baseline vs speculative (p50; speedup with 95% CI)\n"
        "┏━━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━┓\n"
        "┃ prompt class ┃ metric    ┃ baseline ┃ speculative ┃   speedup [95% CI] ┃\n"
        "┡━━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━┩\n"
        "│ open         │ TTFT ms   │    201.2 │       150.7 │                n/a │\n"
        "│              │ TPOT ms   │     33.3 │        16.7 │ 2.00x [1.90, 2.10] │\n"
        "│              │ ITL ms    │     32.1 │        17.1 │                n/a │\n"
        "│              │ e2e s     │     4.32 │        2.47 │                n/a │\n"
        "│              │ tok/s/req │     30.1 │        58.8 │                n/a │\n"
        "├──────────────┼───────────┼──────────┼─────────────┼────────────────────┤\n"
        "│ all (pooled) │ TTFT ms   │    152.3 │       130.2 │                n/a │\n"
        "│              │ TPOT ms   │     40.1 │        16.0 │ 2.00x [1.90, 2.10] │\n"
        "│              │ ITL ms    │     38.8 │        16.3 │                n/a │\n"
        "│              │ e2e s     │     5.01 │        2.23 │                n/a │\n"
        "│              │ tok/s/req │     25.4 │        61.9 │                n/a │\n"
        "└──────────────┴───────────┴──────────┴─────────────┴────────────────────┘\n"
    )


def test_a_terminal_narrower_than_the_table_cuts_cells_and_keeps_one_line_per_row() -> None:
    lines = _shown(_plain(), 40).splitlines()
    # title, top rule, header, header rule, 5 rows, the rule after the class, 5 pooled rows, bottom rule
    assert len(lines) == 16
    assert all(len(x) <= 40 for x in lines[1:])  # the title is a line of its own, never cut
    assert [x.split("│")[1].strip() for x in lines[4:9] + lines[10:15]] == ["open"] + [""] * 4 + ["all …"] + [""] * 4


def test_a_prompt_class_measured_by_one_variant_shows_n_a_for_the_other_and_for_every_ratio() -> None:
    only_b = _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12, cost=_cost(50.0), goodput=_goodput(1.5, 120.04, 0.75))
    only_s = _variant(0.1507, 0.01666, 0.01712, 2.468, 58.76, cost=_cost(20.0), goodput=_goodput(2.5, 310.06, 0.875),
                      acceptance=Acceptance(source="stream", rate=0.5, mean_accepted_length=2.5))  # fmt: skip
    classes = {"open": ClassSummary(variants={"baseline": only_b}), "structured": ClassSummary(variants={
        "speculative": only_s})}  # fmt: skip
    rows = _rows(render_table(_summary(classes, {"baseline": only_b, "speculative": only_s}, None)))
    assert rows[:19] == [
        ["open", "TTFT ms", "201.2", "n/a", "n/a"],
        ["", "TPOT ms", "33.3", "n/a", "n/a"],
        ["", "ITL ms", "32.1", "n/a", "n/a"],
        ["", "e2e s", "4.32", "n/a", "n/a"],
        ["", "tok/s/req", "30.1", "n/a", "n/a"],
        # a cost on one side only: no ratio
        ["", "$/M tokens", "$50.00", "n/a", "n/a"],
        ["", "goodput req/s", "1.50", "n/a", "n/a"],
        ["", "goodput tok/s", "120.0", "n/a", "n/a"],
        ["", "within SLO", "75%", "n/a", ""],
        ["", "p90:ttft<=1s", "432.1 ms met", "n/a", ""],
        ["structured", "TTFT ms", "n/a", "150.7", "n/a"],
        ["", "TPOT ms", "n/a", "16.7", "n/a"],
        ["", "ITL ms", "n/a", "17.1", "n/a"],
        ["", "e2e s", "n/a", "2.47", "n/a"],
        ["", "tok/s/req", "n/a", "58.8", "n/a"],
        ["", "acceptance", "", "2.50 tok/step, 50% (stream)", ""],
        ["", "$/M tokens", "n/a", "$20.00", "n/a"],
        ["", "goodput req/s", "n/a", "2.50", "n/a"],
        ["", "goodput tok/s", "n/a", "310.1", "n/a"],
    ]
    assert rows[19:21] == [["", "within SLO", "n/a", "88%", ""], ["", "p90:ttft<=1s", "n/a", "432.1 ms met", ""]]


def test_acceptance_without_a_rate_and_a_goodput_of_zero_read_n_a() -> None:
    b = _variant(0.2012, 0.03333, 0.03214, 4.321, 30.12, goodput=_goodput(0.0, 0.0, 0.0))
    s = _variant(0.1507, 0.01666, 0.01712, 2.468, 58.76, goodput=_goodput(2.5, 310.06, 0.875),
                 acceptance=Acceptance(source="counters", rate=None, mean_accepted_length=3.456))  # fmt: skip
    classes = {"open": ClassSummary(variants={"baseline": b, "speculative": s})}
    rows = _rows(render_table(_summary(classes, {"baseline": b, "speculative": s}, None)))
    assert rows[5:10] == [
        # counters that give a length but no rate (3.456 -> 3.46)
        ["", "acceptance", "", "3.46 tok/step, n/a (counters)", ""],
        # no baseline request within the SLOs: speculative / 0 is no ratio
        ["", "goodput req/s", "0.00", "2.50", "n/a"],
        ["", "goodput tok/s", "0.0", "310.1", "n/a"],
        ["", "within SLO", "0%", "88%", ""],
        ["", "p90:ttft<=1s", "432.1 ms met", "432.1 ms met", ""],
    ]
