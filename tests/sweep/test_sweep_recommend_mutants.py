"""What the sweep's recommendation module tells the user where its other tests left room: rows of a class summary
that lacks a variant or a figure, the missed-SLO texts, the whole analysis at two load levels (level order, the
crossover scopes, the mix only for two classes or more, the caller's minimum gain and objective), tie-breaks and
sort orders that a wrong key would change, the explanation's notes at and around their 10% bar, and the timing
notes. Every expected value is worked out here by hand."""

from __future__ import annotations

import math

import pytest

from doubles.summaries import variant
from spectrn.run.summary import (
    ClassSummary,
    Goodput,
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
from spectrn.sweep.predict import CostFit
from spectrn.sweep.recommend import (
    CellInput,
    Row,
    _cheaper,
    _row,
    analyze_sweep,
    crossovers,
    default_mix,
    explain,
    explain_row,
    fit_draft_costs,
    mix_rows,
    recommend,
    timing_note,
)

Z = 1.959964


def summary(levels: list[LevelSummary], provenance: Provenance | None = None) -> Summary:
    return Summary(run_id="cell", verdict=Verdict(clean=True, performance=True), levels=levels,
                   provenance=provenance or Provenance())  # fmt: skip


def level(label: str, per_class: dict[str, tuple[float, tuple[float, float]]]) -> LevelSummary:
    """One load level whose classes each have a 40 ms baseline TPOT and the given speedup and interval (the pooled
    scope ``all`` has no figures)."""
    by = {
        cls: ClassSummary(
            variants={
                "baseline": variant(0.05, 0.04, 0.04, 1.0, 25.0),
                "speculative": variant(0.05, 0.04 / s, 0.04 / s, 1.0, 25.0 * s),
            },
            speedup=Speedups(paired_requests=10, tpot_p50=Speedup(value=s, ci95=ci)),
        )  # fmt: skip
        for cls, (s, ci) in per_class.items()
    }
    return LevelSummary(load=Load.parse(label), by_prompt_class=by)


def cells(classes: tuple[str, ...]) -> list[CellInput]:
    """qwen3-1.7b k7 at c16 (no gain: 1.00x [0.80, 1.25]) and at c4 (2.00x [1.60, 2.50]), c16 first."""
    c16 = level("c16", dict.fromkeys(classes, (1.0, (0.8, 1.25))))
    c4 = level("c4", dict.fromkeys(classes, (2.0, (1.6, 2.5))))
    return [CellInput("qwen3-1.7b", 7, lv.load.label, summary([lv])) for lv in (c16, c4)]


# ---- rows of a class summary ------------------------------------------------------------------------------------


def nxdi_cell() -> CellInput:
    servers = {"speculative": ServerIdentity(window_semantics="nxdi")}
    return CellInput("qwen3-1.7b", 7, "c4", summary([level("c4", {})], Provenance(runtime="sim", servers=servers)))


def test_a_class_with_no_variant_and_no_speedup_is_a_row_of_nothing_but_its_cell() -> None:
    """Nothing measured: no figure, zero paired requests, and the window semantics of the cell's server."""
    r = _row(nxdi_cell(), "structured", ClassSummary())
    assert r == Row(draft="qwen3-1.7b", window=7, level="c4", prompt_class="structured", speedup=None, ci95=None,
                    requests=0, semantics="nxdi")  # fmt: skip


def test_a_row_without_intervals_and_with_missed_slos_word_for_word() -> None:
    """Speedups without intervals stay without them; each missed SLO reads ``slo (observed ms)`` or ``slo (no
    value)``, and a met one is not listed."""
    checks = [
        SloCheck(slo="p90:ttft<=1ms", metric="ttft", percentile=90, threshold_s=0.001, observed_s=0.0123456, met=False),
        SloCheck(slo="p50:tpot<=1s", metric="tpot", percentile=50, threshold_s=1.0, observed_s=0.02, met=True),
        SloCheck(slo="p99:e2e<=1s", metric="e2e", percentile=99, threshold_s=1.0, observed_s=None, met=False),
    ]
    spec = variant(0.1, 0.02, 0.02, 2.0, 50.0, goodput=Goodput(checks=checks, all_met=False))
    cs = ClassSummary(
        variants={"baseline": variant(0.05, 0.04, 0.04, 4.0, 25.0), "speculative": spec},
        speedup=Speedups(paired_requests=7, tpot_p50=Speedup(value=2.0), throughput=Speedup(value=1.5),
                         ttft_p50=Speedup(value=0.5)),
    )  # fmt: skip
    r = _row(nxdi_cell(), "open", cs)
    assert r == Row(
        draft="qwen3-1.7b", window=7, level="c4", prompt_class="open", speedup=2.0, ci95=None, throughput=1.5,
        throughput_ci95=None, tpot_base_s=0.04, tpot_spec_s=0.02, tpot_spec_ci95=None, semantics="nxdi", requests=7,
        slo_spec=False, slo_missed=["p90:ttft<=1ms (12.35 ms)", "p99:e2e<=1s (no value)"], ttft_speedup=0.5,
        ttft_speedup_ci95=None, ttft_base_s=0.05, ttft_spec_s=0.1,
        e2e_spec_s={"p50": 2.0, "p90": 6.0, "p95": 7.0, "p99": 8.0},
        e2e_base_s={"p50": 4.0, "p90": 12.0, "p95": 14.0, "p99": 16.0},
    )  # fmt: skip


# ---- the whole analysis -------------------------------------------------------------------------------------------


def test_two_classes_at_two_levels_cross_over_per_class_and_for_the_mix() -> None:
    """Levels in load order (c4 before c16, though the cells come c16 first and c16 sorts first as text); a
    recommendation per class and for the even mix at each level; a crossover per class and for the mix, which,
    with equal baselines and speedups, is 2.00x at c4 (its interval pays) and 1.00x at c16 (its does not)."""
    out = analyze_sweep(cells(("open", "structured")))
    assert out["levels"] == ["c4", "c16"]
    assert out["mix_weights"] == {"open": 0.5, "structured": 0.5}
    assert [(r["scope"], r["level"]) for r in out["recommendations"]] == [
        ("open", "c4"), ("structured", "c4"), ("mix", "c4"), ("open", "c16"), ("structured", "c16"), ("mix", "c16")
    ]  # fmt: skip
    assert [(c["scope"], c["crossover"], c["text"]) for c in out["crossovers"]] == [
        ("open", "c16", "qwen3-1.7b k7 (open): stops paying at c16"),
        ("structured", "c16", "qwen3-1.7b k7 (structured): stops paying at c16"),
        ("mix", "c16", "qwen3-1.7b k7 (mix): stops paying at c16"),
    ]
    # the mix at c4: each class holds half the speculative time, so the log half-width is z * se / sqrt(2)
    half = math.log(2.5 / 1.6) / 2 / math.sqrt(2)
    (mix_c4,) = [lv for lv in out["crossovers"][2]["levels"] if lv["level"] == "c4"]
    assert mix_c4["speedup"] == pytest.approx(2.0)
    assert mix_c4["ci95"] == pytest.approx([2.0 * math.exp(-half), 2.0 * math.exp(half)])
    assert out["objective"]["chosen_by"] == "default: no percentile SLO is set"


def test_one_class_has_no_mix_recommendation_and_no_mix_crossover() -> None:
    out = analyze_sweep(cells(("structured",)))
    assert [(r["scope"], r["level"]) for r in out["recommendations"]] == [("structured", "c4"), ("structured", "c16")]
    assert [c["text"] for c in out["crossovers"]] == ["qwen3-1.7b k7 (structured): stops paying at c16"]


def test_the_analysis_uses_the_callers_minimum_gain_and_objective() -> None:
    """With a 150% bar, 2.00x clears nothing: neither a class nor the mix gets a configuration."""
    out = analyze_sweep(cells(("open", "structured")), min_gain=1.5, objective=("tpot", "p90"))
    c4 = {r["scope"]: r for r in out["recommendations"] if r["level"] == "c4"}
    assert c4["open"]["text"] == (
        "open @ c4: no meaningful gain: the best configuration, qwen3-1.7b k7: 2.00x [1.60, 2.50], does not clear "
        "2.50x with its CI above 1; serve without speculation"
    )
    assert (c4["mix"]["chosen"], c4["mix"]["meaningful"]) == (None, False)
    assert out["objective"]["chosen_by"] == "given"


# ---- tie-breaks and orders ------------------------------------------------------------------------------------


def row(draft: str, window: int, speedup: float | None, ci: list[float] | None, *, level: str = "c4",
        cls: str = "structured") -> Row:  # fmt: skip
    return Row(draft=draft, window=window, level=level, prompt_class=cls, speedup=speedup, ci95=ci)


def test_the_objectives_cost_key_is_window_then_draft_size_then_name() -> None:
    assert _cheaper({"window": 3, "draft": "org/tiny-0.5b", "speedup": 2.0}) == (3, 0.5, "org/tiny-0.5b")


def test_the_default_mix_weighs_every_measured_class_once() -> None:
    rows = [row("d", 3, 2.0, None, cls=c) for c in ("structured", "all", "open", "mix")]
    assert default_mix(rows) == {"open": 1.0, "structured": 1.0}


def test_a_zero_speedup_ranks_below_a_half() -> None:
    r = recommend([row("d", 3, 0.0, None), row("d", 5, 0.5, None)], "structured", "c4")
    assert r.best is not None and (r.best.window, r.best.speedup) == (5, 0.5)


def test_the_callers_bar_judges_the_cheaper_tie_too() -> None:
    """Bar 50%: the best, 1.60x [1.25, 2.00], clears it; the cheaper tie, 1.20x [1.10, 1.30], wins but does not."""
    best, cheap = row("qwen3-1.7b", 7, 1.6, [1.25, 2.0]), row("qwen3-0.6b", 3, 1.2, [1.1, 1.3])
    r = recommend([best, cheap], "structured", "c4", min_gain=0.5)
    assert r.chosen is cheap and r.meaningful is False
    assert r.text.endswith("(but the cheaper configuration's own gain is not meaningful: consider the best one)")


def test_every_configuration_within_the_best_interval_is_named() -> None:
    rows = [row("qwen3-0.6b", 3, 2.5, [2.4, 2.6]), row("qwen3-1.7b", 5, 2.45, [2.3, 2.55]),
            row("qwen3-1.7b", 7, 2.42, [2.2, 2.5])]  # fmt: skip
    assert recommend(rows, "structured", "c4").text == (
        "structured @ c4: qwen3-0.6b k3: 2.50x [2.40, 2.60] is best; within its CI: qwen3-1.7b k5: 2.45x [2.30, 2.55]; "
        "qwen3-1.7b k7: 2.42x [2.20, 2.50]"
    )


def test_crossovers_list_smaller_drafts_first_whatever_their_names() -> None:
    rows = [row("aa-3b", 2, 2.0, [1.5, 2.5]), row("zz-0.5b", 3, 2.0, [1.5, 2.5])]
    assert [c["draft"] for c in crossovers(rows, "structured")] == ["zz-0.5b", "aa-3b"]


def test_cost_fits_are_listed_by_draft_size_then_draft_name_then_load() -> None:
    rows = [row(d, 3, 2.0, None, level=lv) for d, lv in
            [("aa-3b", "c4"), ("zz-0.5b", "c16"), ("b-1b", "c1"), ("zz-0.5b", "c4"), ("a-1b", "c2")]]  # fmt: skip
    assert [(f["draft"], f["level"]) for f in explain(rows)["cost_fits"]] == [
        ("zz-0.5b", "c4"), ("zz-0.5b", "c16"), ("a-1b", "c2"), ("b-1b", "c1"), ("aa-3b", "c4")
    ]  # fmt: skip


# ---- the cost line and the explanation ------------------------------------------------------------------------


def measured(draft: str, window: int, cls: str, *, base: float | None, spec: float, length: float | None,
             level: str = "c4") -> Row:  # fmt: skip
    r = row(draft, window, 2.0, [1.8, 2.2], level=level, cls=cls)
    r.tpot_base_s, r.tpot_spec_s, r.length = base, spec, length
    return r


def test_the_cost_line_takes_every_class_of_its_draft_at_its_level_and_nothing_else() -> None:
    """Steps of 40 ms at window 0 and 40 + 5k ms at windows 3 and 5: 40 ms and 5 ms a window token. The pooled
    row comes first and is skipped; the draft's other level and another draft at this level are not points."""
    rows = [
        measured("d", 5, "all", base=0.5, spec=0.5, length=1.0),
        measured("d", 3, "structured", base=0.04, spec=0.055 / 2.5, length=2.5),
        measured("d", 5, "open", base=0.04, spec=0.065 / 3.25, length=3.25),
        measured("d", 5, "open", base=0.1, spec=0.05, length=3.0, level="c16"),
        measured("e", 7, "open", base=0.2, spec=0.1, length=2.0),
    ]
    fit = fit_draft_costs(rows, "d", "c4")
    assert fit is not None
    assert [(p["window"], p["label"]) for p in fit.points] == [
        (0, "baseline/structured"), (3, "k3/structured"), (0, "baseline/open"), (5, "k5/open")
    ]  # fmt: skip
    assert (fit.intercept_s, fit.draft_s) == (pytest.approx(0.04), pytest.approx(0.005))


def explained_row(*, length: float, per_position: list[float] | None, window: int = 3, tpot_spec: float = 0.02,
                  semantics: str = "upstream") -> Row:  # fmt: skip
    r = row("qwen3-1.7b", window, 2.0, [1.8, 2.2])
    r.length, r.per_position, r.acceptance_rate, r.tpot_spec_s = length, per_position, 0.6, tpot_spec
    r.semantics = semantics  # type: ignore[assignment]
    return r


def fit(intercept: float, draft: float) -> CostFit:
    return CostFit(intercept_s=intercept, draft_s=draft, target_s=intercept, points=[], residuals_s=[], exact=True)


def test_both_notes_word_for_word_when_acceptance_and_the_cost_line_disagree() -> None:
    """The line gives a window-3 step of 40 + 3 x 5 = 55 ms, over L = 2.00: 27.50 ms a token, where 20.00 ms was
    measured (37.5% off)."""
    out = explain_row(explained_row(length=2.0, per_position=[0.8, 0.6, 0.4]), fit(0.04, 0.005))
    assert out["model_tpot_s"] == pytest.approx(0.0275)
    acceptance = (
        "observed L = 2.00 is 48% below (1 - a^(p+1))/(1 - a) = 2.95 with a = 0.80 (position 0): the formula assumes "
        "every position is accepted as often as the first, but conditional acceptance falls from 0.80 at position 0 "
        "to 0.67 at position 2, so each extra position of window 3 adds less than the formula says"
    )
    model = (
        "the linear step-cost model gives TPOT 27.50 ms but 20.00 ms was measured: step cost is not linear in the "
        "window here (queueing, or a compiled graph that differs per window)"
    )
    assert out["disagreements"] == [acceptance, model]
    assert out["text"] == (
        "qwen3-1.7b k3 structured @ c4: L = 2.00 tokens/step, constant-acceptance expectation 2.95, each window token "
        f"costs 0.125 target steps. {acceptance} {model}"
    )


def test_a_disagreement_of_exactly_ten_percent_is_not_a_note() -> None:
    """Cost line: (0.125 + 3 x 0.015625) / 2 = 0.0859375 s against 0.078125 s measured, 10% exactly. Acceptance:
    a = 0.375 over one proposal expects 1.375 tokens a step against 1.25 observed, 10% exactly."""
    line = explain_row(explained_row(length=2.0, per_position=None, tpot_spec=0.078125), fit(0.125, 0.015625))
    assert line["model_tpot_s"] == 0.0859375 and line["disagreements"] == []
    acc = explain_row(explained_row(length=1.25, per_position=[0.375], window=1), None)
    assert acc["expected_length_first_position"] == 1.375 and acc["disagreements"] == []


def test_a_disagreement_under_ten_percent_is_not_a_note() -> None:
    """2.95 expected against 2.80 observed: 5% off."""
    assert explain_row(explained_row(length=2.8, per_position=[0.8, 0.6, 0.4]), None)["disagreements"] == []


def test_the_rate_expectation_counts_nxdi_proposals() -> None:
    """NxDI window 3 makes 2 proposals: (1 - 0.6^3) / 0.4 = 1.96 at the accepted/drafted rate 0.6."""
    out = explain_row(explained_row(length=2.0, per_position=None, semantics="nxdi"), None)
    assert out["expected_length_rate"] == pytest.approx(1.96)


# ---- the mix ----------------------------------------------------------------------------------------------------


def cls_row(cls: str, base: float | None, speedup: float, ci: list[float] | None, *, draft: str = "d") -> Row:
    r = row(draft, 5, speedup, ci, cls=cls)
    r.tpot_base_s = base
    return r


def test_a_group_without_a_mix_row_does_not_stop_the_later_ones() -> None:
    rows = [
        cls_row("a", 0.04, 2.0, None, draft="a-missing-b"),
        cls_row("a", None, 2.0, None, draft="b-no-baseline"),
        cls_row("b", 0.04, 2.0, None, draft="b-no-baseline"),
        cls_row("a", 0.04, 2.0, None, draft="c"),
        cls_row("b", 0.04, 2.0, None, draft="c"),
    ]
    assert [(m.draft, m.speedup) for m in mix_rows(rows, {"a": 1.0, "b": 1.0})] == [("c", 2.0)]


def test_a_one_class_mix_without_an_interval_has_none() -> None:
    (m,) = mix_rows([cls_row("a", 0.04, 2.0, None)], {"a": 1.0})
    assert (m.speedup, m.ci95) == (2.0, None)


def test_a_class_with_a_zero_width_interval_adds_no_spread_to_the_mix() -> None:
    """Weights 3:1; class a 2.00x [2.00, 2.00] (log SE 0), class b 1.25x [1.00, 1.5625]: b holds 0.01 of the mix's
    0.025 s speculative TPOT, so the mix's log half-width is 0.4 x ln(1.5625) / 2."""
    (m,) = mix_rows([cls_row("a", 0.04, 2.0, [2.0, 2.0]), cls_row("b", 0.05, 1.25, [1.0, 1.5625])], {"a": 3, "b": 1})
    half = 0.4 * math.log(1.5625) / 2
    assert m.speedup == pytest.approx(1.7)
    assert m.ci95 == pytest.approx([1.7 * math.exp(-half), 1.7 * math.exp(half)])


# ---- timing -------------------------------------------------------------------------------------------------------


def test_timing_notes_word_for_word() -> None:
    def note(**p: object) -> str | None:
        return timing_note(summary([level("c4", {})], Provenance(**p)))  # type: ignore[arg-type]

    assert note(runtime="sim", time_scale=10.0, rescaled=True) == (
        "simulated at time scale 10: figures rescaled to real time"
    )
    assert note(runtime="sim", time_scale=2.0) == "simulated at time scale 2: figures are SCALED, not real time"
    assert note(runtime="endpoints") == (
        "figures in the servers' own time (simulators run at a time scale: pass it as --time-scale)"
    )
    assert note(runtime="sim") is None
