"""recommend.py on synthetic matrices: best, ties within CIs, no gain, mix CIs, crossovers, explanations."""

from __future__ import annotations

import math

import pytest

from spectrn.errors import ConfigError
from spectrn.run.summary import (
    CI95,
    Acceptance,
    ClassSummary,
    LevelSummary,
    Load,
    Requests,
    Speedup,
    Speedups,
    Stats,
    Summary,
    Throughput,
    VariantSummary,
    Verdict,
)
from spectrn.sweep.recommend import (
    ALL,
    MIX,
    CellInput,
    Row,
    analyze_sweep,
    build_matrix,
    crossovers,
    explain_row,
    fit_draft_costs,
    level_key,
    mix_rows,
    overlaps,
    parse_mix,
    recommend,
)


def row(draft: str, k: int, sp: float | None, ci: tuple[float, float] | None, *, cls: str = "structured",
        level: str = "c4", thr: float | None = None, thr_ci: tuple[float, float] | None = None,
        base: float = 0.045, length: float | None = None, per_position: list[float] | None = None) -> Row:  # fmt: skip
    return Row(
        draft=draft,
        window=k,
        level=level,
        prompt_class=cls,
        speedup=sp,
        ci95=list(ci) if ci else None,
        throughput=thr,
        throughput_ci95=list(thr_ci) if thr_ci else None,
        tpot_base_s=base,
        tpot_spec_s=base / sp if sp else None,
        length=length,
        per_position=per_position,
    )


def test_clear_best_is_recommended() -> None:
    rows = [
        row("qwen3-1.7b", 5, 2.4, (2.3, 2.5)),
        row("qwen3-1.7b", 7, 3.0, (2.9, 3.1)),
        row("qwen3-1.7b", 15, 2.2, (2.1, 2.3)),
        row("qwen3-0.6b", 7, 1.1, (1.0, 1.2)),
    ]
    rec = recommend(rows, "structured", "c4")
    assert rec.chosen is rec.best and rec.chosen is not None
    assert (rec.chosen.draft, rec.chosen.window) == ("qwen3-1.7b", 7)
    assert rec.meaningful and [r.window for r in rec.ties] == [7]
    assert "is best" in rec.text


def test_tie_within_ci_prefers_smaller_window_then_smaller_draft_and_says_so() -> None:
    rows = [
        row("qwen3-1.7b", 7, 3.0, (2.7, 3.3)),
        row("qwen3-1.7b", 5, 2.9, (2.6, 3.1)),  # overlaps the best: cheaper window wins
        row("qwen3-4b", 5, 2.95, (2.65, 3.2)),  # same window, larger draft: loses the tie to 1.7b
        row("qwen3-1.7b", 10, 2.5, (2.4, 2.6)),  # no overlap
    ]
    rec = recommend(rows, "structured", "c4")
    assert rec.best is not None and rec.best.window == 7
    assert rec.chosen is not None and (rec.chosen.draft, rec.chosen.window) == ("qwen3-1.7b", 5)
    assert {(r.draft, r.window) for r in rec.ties} == {("qwen3-1.7b", 7), ("qwen3-1.7b", 5), ("qwen3-4b", 5)}
    assert "CI overlaps the best" in rec.text and "cheaper configuration" in rec.text


def test_touching_intervals_count_as_overlap_and_missing_ci_is_a_point() -> None:
    a = row("d", 5, 2.0, (1.8, 2.2))
    assert overlaps(a, row("d", 7, 2.4, (2.2, 2.6)))
    assert not overlaps(a, row("d", 7, 2.4, (2.21, 2.6)))
    assert overlaps(a, row("d", 7, 2.1, None))
    assert not overlaps(a, row("d", 7, 2.3, None))


def test_no_meaningful_gain_recommends_no_speculation() -> None:
    rows = [row("qwen3-1.7b", 5, 1.02, (0.97, 1.07), cls="open"), row("qwen3-1.7b", 7, 0.95, (0.9, 1.0), cls="open")]
    rec = recommend(rows, "open", "c4")
    assert rec.chosen is None and not rec.meaningful
    assert rec.best is not None and rec.best.window == 5
    assert "no meaningful gain" in rec.text and "without speculation" in rec.text
    # above 1 but below the minimum gain: still not meaningful
    small = [row("qwen3-1.7b", 5, 1.03, (1.01, 1.05), cls="open")]
    assert recommend(small, "open", "c4").chosen is None
    assert recommend(small, "open", "c4", min_gain=0.02).chosen is not None
    assert recommend([], "open", "c4").text.endswith("no measured configuration")


def test_mix_speedup_and_delta_method_ci() -> None:
    s = row("d", 7, 3.0, (2.7, 3.3), base=0.045)
    o = row("d", 7, 0.95, (0.9, 1.0), cls="open", base=0.047)
    (m,) = mix_rows([s, o], {"structured": 0.7, "open": 0.3})
    assert m.prompt_class == MIX
    base = 0.7 * 0.045 + 0.3 * 0.047
    spec = 0.7 * 0.045 / 3.0 + 0.3 * 0.047 / 0.95
    assert m.speedup == pytest.approx(base / spec)
    assert m.ci95 is not None and m.ci95[0] < m.speedup < m.ci95[1]
    # the delta method on log scale: with equal weights and equal CIs the half-width shrinks by sqrt(2)
    s2 = row("d", 7, 2.0, (1.6, 2.5), base=0.04)
    o2 = row("d", 7, 2.0, (1.6, 2.5), cls="open", base=0.04)
    (eq,) = mix_rows([s2, o2], {"structured": 1, "open": 1})
    assert eq.speedup == pytest.approx(2.0) and eq.ci95 is not None
    half = (math.log(2.5) - math.log(1.6)) / 2
    assert math.log(eq.ci95[1] / eq.ci95[0]) / 2 == pytest.approx(half / math.sqrt(2))
    # a single-class mix is that class, CI included
    (only,) = mix_rows([s, o], {"structured": 1.0})
    assert only.speedup == pytest.approx(3.0) and only.ci95 == [2.7, 3.3]
    # a cell missing a weighted class gives no mix row
    assert mix_rows([s], {"structured": 0.5, "open": 0.5}) == []


def test_parse_mix() -> None:
    assert parse_mix("structured=0.7, open=0.3") == {"structured": 0.7, "open": 0.3}
    assert parse_mix(None) is None
    for bad, msg in [("structured", "CLASS=WEIGHT"), ("a=x", "not a number"), ("a=-1", ">= 0"), ("a=0", "sum to 0")]:
        with pytest.raises(ConfigError, match=msg):
            parse_mix(bad)


def test_crossover_is_the_lowest_level_where_speculation_stops_paying() -> None:
    rows = [
        row("d", 7, 2.5, (2.3, 2.7), cls=ALL, level="c1", thr=2.4, thr_ci=(2.2, 2.6)),
        row("d", 7, 1.6, (1.4, 1.8), cls=ALL, level="c4", thr=1.5, thr_ci=(1.3, 1.7)),
        row("d", 7, 1.1, (0.95, 1.25), cls=ALL, level="c16", thr=0.8, thr_ci=(0.7, 0.9)),  # throughput < 1
        row("d", 7, 0.9, (0.8, 1.0), cls=ALL, level="c64", thr=0.7, thr_ci=(0.6, 0.8)),
        row("d", 5, 2.0, (1.9, 2.1), cls=ALL, level="c1", thr=1.9),
        row("d", 5, 1.5, (1.4, 1.6), cls=ALL, level="c16", thr=1.2),
        row("d", 10, 1.3, (0.9, 1.6), cls=ALL, level="c4", thr=0.98, thr_ci=(0.9, 1.05)),  # not significant
        row("d", 10, 0.95, (0.9, 0.99), cls=ALL, level="c1"),  # ordered by load, not by input order
    ]
    by = {c["window"]: c for c in crossovers(rows, ALL)}
    assert by[7]["crossover"] == "c16"
    assert [lv["level"] for lv in by[7]["levels"]] == ["c1", "c4", "c16", "c64"]
    assert by[5]["crossover"] is None and "pays at every measured load" in by[5]["text"]
    assert by[10]["crossover"] == "c1" and "does not pay even at the lowest" in by[10]["text"]
    assert by[7]["pays_at_lowest"] and not by[10]["pays_at_lowest"]
    assert "stops paying at c16" in by[7]["text"]
    assert sorted(["r2", "c16", "c4", "r0.5"], key=level_key) == ["c4", "c16", "r0.5", "r2"]


def test_explanation_flags_decaying_acceptance_and_agrees_on_constant() -> None:
    const = [0.8**i for i in range(1, 8)]
    r = row("d", 7, 2.0, (1.9, 2.1), length=1 + sum(const), per_position=const)
    e = explain_row(r, None)
    assert e["first_position"] == pytest.approx(0.8)
    assert e["expected_length_first_position"] == pytest.approx(r.length)
    assert e["disagreements"] == []
    decaying_cond = [0.9, 0.9, 0.8, 0.5, 0.2, 0.1, 0.05]
    pp, run = [], 1.0
    for a in decaying_cond:
        run *= a
        pp.append(run)
    r2 = row("d", 7, 2.0, (1.9, 2.1), length=1 + sum(pp), per_position=pp)
    e2 = explain_row(r2, None)
    assert len(e2["disagreements"]) == 1 and "below" in e2["disagreements"][0]
    assert e2["conditional"] == pytest.approx(decaying_cond)


def test_cost_fit_from_rows_and_model_disagreement() -> None:
    # step(k) = 0.04 + 0.002 k; lengths chosen per class; TPOT = step / L
    rows = []
    for k, ls, lo in [(5, 4.0, 1.4), (15, 5.0, 1.45)]:
        step = 0.04 + 0.002 * k
        rows.append(row("d", k, 0.04 / (step / ls), None, base=0.04, length=ls))
        rows.append(row("d", k, 0.04 / (step / lo), None, cls="open", base=0.04, length=lo))
    fit = fit_draft_costs(rows, "d", "c4")
    assert fit is not None
    assert fit.intercept_s == pytest.approx(0.04) and fit.draft_s == pytest.approx(0.002)
    assert fit.draft_to_target == pytest.approx(0.05)
    bad = row("d", 10, 2.0, None, base=0.04, length=4.5)
    bad.tpot_spec_s = 2 * (0.04 + 0.002 * 10) / 4.5
    e = explain_row(bad, fit)
    assert e["model_tpot_s"] == pytest.approx((0.04 + 0.02) / 4.5)
    assert any("not linear" in d for d in e["disagreements"])


def summary(
    structured: tuple[float, list[float]], open_: tuple[float, list[float]], structured_acc: Acceptance | None = None
) -> Summary:
    def sp(v: float, ci: list[float]) -> Speedups:
        return Speedups(paired_requests=8, tpot_p50=Speedup(value=v, ci95=(ci[0], ci[1])),
                        throughput=Speedup(value=v, ci95=(ci[0], ci[1])))  # fmt: skip

    def var(t: float, acc: Acceptance | None = None) -> VariantSummary:
        return VariantSummary(
            ttft_s=Stats(), tpot_s=Stats(p50=t, ci95=CI95(p50=(t * 0.95, t * 1.05))), itl_s=Stats(), e2e_s=Stats(),
            chunk_latency_s=Stats(), llmperf_itl_s=Stats(), output_tokens_per_s=Throughput(per_request=Stats()),
            output_tokens=Stats(), requests=Requests(completed=8), acceptance=acc,
        )  # fmt: skip

    counters = Acceptance(source="counters", rate=0.5, mean_accepted_length=3.0, per_position=[0.9, 0.6])
    level = LevelSummary(
        load=Load.parse("c4"),
        variants={"baseline": var(0.045), "speculative": var(0.03, counters)},
        speedup=sp(1.5, [1.4, 1.6]),
        by_prompt_class={
            "structured": ClassSummary(
                variants={"baseline": var(0.045), "speculative": var(0.045 / structured[0], structured_acc)},
                speedup=sp(*structured),
            ),
            "open": ClassSummary(
                variants={"baseline": var(0.047), "speculative": var(0.047 / open_[0])}, speedup=sp(*open_)
            ),
        },
    )
    return Summary(run_id="r", verdict=Verdict(clean=True, performance=True), levels=[level])


def test_build_matrix_and_analyze_sweep_end_to_end_on_synthetic_cells() -> None:
    cells = [
        CellInput("qwen3-1.7b", 7, "c4", summary((3.0, [2.8, 3.2]), (0.95, [0.9, 1.0]), Acceptance(
            source="stream", rate=3.5 / 7, mean_accepted_length=4.5, per_position=[0.9, 0.8]))),
        CellInput("qwen3-1.7b", 5, "c4", summary((2.9, [2.7, 3.05]), (1.0, [0.95, 1.05]))),
        CellInput("qwen3-0.6b", 7, "c4", summary((1.1, [1.0, 1.2]), (0.9, [0.85, 0.95]))),
    ]  # fmt: skip
    rows = build_matrix(cells)
    assert len(rows) == 9
    r = next(x for x in rows if x.draft == "qwen3-1.7b" and x.window == 7 and x.prompt_class == "structured")
    assert r.speedup == 3.0 and r.ci95 == [2.8, 3.2] and r.length == 4.5
    assert r.acceptance_rate == pytest.approx(3.5 / 7) and r.acceptance_source == "stream"
    a = next(x for x in rows if x.window == 7 and x.prompt_class == ALL and x.draft == "qwen3-1.7b")
    assert a.length == 3.0 and a.per_position == [0.9, 0.6]  # the server's counters for the whole run
    out = analyze_sweep(cells, weights={"structured": 0.7, "open": 0.3})
    recs = {x["scope"]: x for x in out["recommendations"]}
    assert set(recs) == {"structured", "open", MIX}
    assert recs["structured"]["chosen"]["window"] == 5  # tie with 7 (CIs overlap): cheaper window
    assert recs["structured"]["best"]["window"] == 7
    assert recs["open"]["chosen"] is None
    assert recs[MIX]["weights"] == {"structured": 0.7, "open": 0.3}
    assert out["crossovers"] == []  # one level only
    with pytest.raises(ConfigError, match="did not measure"):
        analyze_sweep(cells, weights={"code": 1.0})
