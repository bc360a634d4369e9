"""What a sweep tells the user, word for word: every branch of the recommendation and of the crossover table on
small matrices whose answers are worked out here by hand (labels ``<draft> k<window>: <speedup>x [lo, hi]``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from doubles.runfactory import make_run
from spectrn.analyze.run import ensure_summary
from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import AnalysisError, ConfigError
from spectrn.run.folder import RunFolder
from spectrn.sweep.recommend import (
    CellInput,
    Row,
    _label,
    _log_se,
    analyze_sweep,
    build_matrix,
    crossovers,
    draft_size,
    explain,
    explain_row,
    mix_rows,
    parse_mix,
    pays,
    recommend,
    stops_paying,
)


def row(
    draft: str,
    window: int,
    speedup: float | None,
    ci: list[float] | None,
    *,
    level: str = "c4",
    cls: str = "structured",
    throughput: float | None = None,
    throughput_ci: list[float] | None = None,
) -> Row:
    return Row(draft=draft, window=window, level=level, prompt_class=cls, speedup=speedup, ci95=ci,
               throughput=throughput, throughput_ci95=throughput_ci)  # fmt: skip


def test_no_measured_configuration() -> None:
    r = recommend([row("qwen3-1.7b", 7, 2.0, [1.8, 2.2], cls="open")], "structured", "c4")
    assert (r.scope, r.level, r.chosen, r.best, r.ties, r.meaningful) == ("structured", "c4", None, None, [], False)
    assert r.text == "structured @ c4: no measured configuration"
    assert r.to_dict()["ties"] == [] and r.to_dict()["chosen"] is None


def test_no_meaningful_gain_names_the_best_and_the_bar() -> None:
    best = row("qwen3-1.7b", 7, 1.04, [1.01, 1.07])  # under 1 + 5%
    r = recommend([best, row("qwen3-0.6b", 5, 0.9, [0.8, 1.0])], "structured", "c4")
    assert r.chosen is None and r.best is best and r.meaningful is False
    assert r.text == (
        "structured @ c4: no meaningful gain: the best configuration, qwen3-1.7b k7: 1.04x [1.01, 1.07], does not "
        "clear 1.05x with its CI above 1; serve without speculation"
    )
    assert recommend([best], "structured", "c4", min_gain=0.02).chosen is best  # the bar is the caller's


def test_the_best_alone_and_the_best_with_others_inside_its_interval() -> None:
    best = row("qwen3-0.6b", 5, 2.5, [2.4, 2.6])
    alone = recommend([best, row("qwen3-1.7b", 7, 1.5, [1.4, 1.6])], "structured", "c4")
    assert alone.chosen is best and alone.meaningful is True and alone.ties == [best]
    assert alone.text == "structured @ c4: qwen3-0.6b k5: 2.50x [2.40, 2.60] is best"
    dearer = row("qwen3-1.7b", 7, 2.45, [2.3, 2.55])  # inside the best's CI, bigger window and draft
    both = recommend([dearer, best], "structured", "c4")
    assert both.chosen is best and both.ties == [best, dearer]
    assert both.text == (
        "structured @ c4: qwen3-0.6b k5: 2.50x [2.40, 2.60] is best; within its CI: qwen3-1.7b k7: 2.45x [2.30, 2.55]"
    )


def test_a_cheaper_tie_wins_and_says_when_its_own_gain_is_not_meaningful() -> None:
    best = row("qwen3-1.7b", 7, 1.30, [1.10, 1.50])
    cheap = row("qwen3-0.6b", 3, 1.04, [0.98, 1.12])  # overlaps the best; does not pay on its own
    r = recommend([best, cheap], "structured", "c4")
    assert r.chosen is cheap and r.best is best and r.meaningful is False
    assert r.text == (
        "structured @ c4: qwen3-0.6b k3: 1.04x [0.98, 1.12] recommended: its CI overlaps the best, qwen3-1.7b k7: "
        "1.30x [1.10, 1.50], so the cheaper configuration (smaller window, then smaller draft) wins the tie (but the "
        "cheaper configuration's own gain is not meaningful: consider the best one)"
    )
    paying = row("qwen3-0.6b", 3, 1.25, [1.08, 1.40])
    r2 = recommend([best, paying], "structured", "c4")
    assert r2.chosen is paying and r2.meaningful is True
    assert r2.text.endswith("so the cheaper configuration (smaller window, then smaller draft) wins the tie")


def test_equal_speedups_prefer_the_cheaper_configuration_as_best() -> None:
    small, big = row("qwen3-0.6b", 5, 2.0, None), row("qwen3-1.7b", 5, 2.0, None)
    r = recommend([big, small], "structured", "c4")
    assert r.best is small and r.chosen is small
    assert (
        r.text == "structured @ c4: qwen3-0.6b k5: 2.00x (no CI) is best; within its CI: qwen3-1.7b k5: 2.00x (no CI)"
    )
    # a speedup below 1 is still ranked by its value, not as if it were 1
    low = recommend([row("qwen3-0.6b", 3, 0.5, None), row("qwen3-1.7b", 3, 0.9, None)], "structured", "c4")
    assert low.best is not None and low.best.draft == "qwen3-1.7b"


def test_pays_and_stops_paying_at_their_boundaries() -> None:
    assert pays(row("d", 1, 1.05, [1.01, 1.1]))  # exactly 1 + min_gain, CI above 1
    assert not pays(row("d", 1, 1.2, [1.0, 1.3]))  # CI touching 1 is not above it
    assert not stops_paying(row("d", 1, 1.2, [1.01, 1.3]))
    assert stops_paying(row("d", 1, 1.2, [1.0, 1.3]))
    assert stops_paying(row("d", 1, 1.2, [1.1, 1.3], throughput=0.9, throughput_ci=[0.8, 0.99]))
    assert not stops_paying(row("d", 1, 1.2, [1.1, 1.3], throughput=0.9, throughput_ci=[0.8, 1.0]))
    assert stops_paying(row("d", 1, 1.2, [1.1, 1.3], throughput=0.99))  # no CI: the point is below 1
    assert not stops_paying(row("d", 1, 1.2, [1.1, 1.3]))  # no throughput: the speedup decides


def test_crossovers_word_for_word() -> None:
    rows = [
        # 1.7b k7: pays at c1 and c4, stops at c16 (CI down to 1)
        row("qwen3-1.7b", 7, 2.0, [1.8, 2.2], level="c4", throughput=1.5, throughput_ci=[1.4, 1.6]),
        row("qwen3-1.7b", 7, 2.2, [2.0, 2.4], level="c1"),
        row("qwen3-1.7b", 7, 1.1, [0.9, 1.3], level="c16"),
        # 0.6b k5: never pays
        row("qwen3-0.6b", 5, 0.95, [0.9, 1.0], level="c1"),
        # 0.6b k3: pays at its one level
        row("qwen3-0.6b", 3, 1.5, [1.2, 1.8], level="c2"),
        row("qwen3-0.6b", 3, 9.0, [8.0, 10.0], level="c2", cls="open"),  # another scope
    ]
    out = crossovers(rows, "structured")
    assert [(c["draft"], c["window"]) for c in out] == [("qwen3-0.6b", 3), ("qwen3-0.6b", 5), ("qwen3-1.7b", 7)]
    k3, k5, k7 = out
    assert k7 == {
        "draft": "qwen3-1.7b",
        "window": 7,
        "scope": "structured",
        "crossover": "c16",
        "levels": [
            {"level": "c1", "speedup": 2.2, "ci95": [2.0, 2.4], "throughput": None, "throughput_ci95": None},
            {"level": "c4", "speedup": 2.0, "ci95": [1.8, 2.2], "throughput": 1.5, "throughput_ci95": [1.4, 1.6]},
            {"level": "c16", "speedup": 1.1, "ci95": [0.9, 1.3], "throughput": None, "throughput_ci95": None},
        ],
        "pays_at_lowest": True,
        "text": "qwen3-1.7b k7 (structured): stops paying at c16",
    }
    assert (k5["crossover"], k5["pays_at_lowest"]) == ("c1", False)
    assert k5["text"] == "qwen3-0.6b k5 (structured): does not pay even at the lowest measured load (c1)"
    assert (k3["crossover"], k3["pays_at_lowest"]) == (None, True)
    assert k3["text"] == "qwen3-0.6b k3 (structured): pays at every measured load (c2)"
    two = crossovers([row("d", 2, 2.0, [1.5, 2.5], level=lv) for lv in ("c8", "c2")], "structured")
    assert two[0]["text"] == "d k2 (structured): pays at every measured load (c2, c8)"


def test_draft_size_from_the_catalog_then_from_the_name() -> None:
    """The catalog's parameter count first (qwen3-8b has 8.2 B, not the 8 its name says), then a size in the name
    (any case, decimals), else unknown: ranked last, as the dearest."""
    assert draft_size("qwen3-8b") == 8.2 and draft_size("qwen3-32b") == 32.8
    assert draft_size("org/My-Draft-3B") == 3.0 and draft_size("tiny-1.5b-eagle") == 1.5
    assert draft_size("eagle3-speculator") == math.inf and draft_size("b-two") == math.inf


def test_a_row_without_a_speedup_neither_pays_nor_shows_a_number() -> None:
    none = row("qwen3-1.7b", 7, None, None)
    assert stops_paying(none) and not pays(none)
    assert _label(none) == "qwen3-1.7b k7: n/a (no CI)"


def test_mix_weights_parse_and_every_refusal_says_how_to_write_them() -> None:
    assert parse_mix(" structured=0.7, open=0.3 ") == {"structured": 0.7, "open": 0.3}
    assert parse_mix("") is None and parse_mix(None) is None
    cases = {
        "structured": ("--mix 'structured': 'structured' is not CLASS=WEIGHT", "e.g. --mix structured=0.7,open=0.3"),
        "a=b=1": ("--mix 'a=b=1': weight 'b=1' is not a number", "e.g. structured=0.7"),
        "open=-1": ("--mix 'open=-1': weight of open must be >= 0", "use non-negative weights"),
        "open=0": ("--mix 'open=0': weights sum to 0", "give at least one class a positive weight"),
    }
    for text, (message, hint) in cases.items():
        with pytest.raises(ConfigError) as e:
            parse_mix(text)
        assert str(e.value) == f"{message} (fix: {hint})"


def test_a_log_standard_error_needs_a_positive_interval() -> None:
    """The mix's interval combines classes on a log scale: an interval that reaches 0 (or has none) has no log SE."""
    assert _log_se(row("d", 1, 2.0, [1.0, 4.0])) == pytest.approx(math.log(4.0) / (2 * 1.959964))
    for ci in ([0.0, 2.0], [-1.0, 2.0], [0.5, 0.0], None):
        assert _log_se(row("d", 1, 2.0, ci)) is None, ci


def test_the_mix_row_by_hand() -> None:
    """Weights 3:1 over two classes (a third class weighted 0 is ignored): the mix's baseline TPOT is the weighted
    mean, its speculative TPOT the weighted mean of each class's baseline / speedup, the speedup their ratio, and
    its interval combines the classes' log standard errors weighted by their share of the speculative time."""

    def cls_row(cls: str, base: float | None, speedup: float, ci: list[float] | None, *, draft: str = "d",
                requests: int = 1) -> Row:  # fmt: skip
        r = row(draft, 5, speedup, ci, cls=cls)
        r.tpot_base_s, r.requests = base, requests
        return r

    rows = [
        cls_row("a", 0.04, 2.0, [1.6, 2.5], requests=10),
        cls_row("b", 0.05, 1.25, [1.0, 1.5625], requests=6),
        cls_row("c", 0.09, 9.0, [8.0, 10.0]),
        cls_row("a", 0.04, 2.0, [1.6, 2.5], draft="e"),  # e: no b measured, no mix row
        cls_row("a", None, 2.0, [1.6, 2.5], draft="f"),  # f: a class without a baseline TPOT, no mix row
        cls_row("b", 0.05, 1.25, [1.0, 1.5625], draft="f"),
    ]
    (m,) = mix_rows(rows, {"a": 3.0, "b": 1.0, "c": 0.0})
    base, spec_a, spec_b = 0.75 * 0.04 + 0.25 * 0.05, 0.75 * 0.04 / 2.0, 0.25 * 0.05 / 1.25
    assert (m.draft, m.window, m.level, m.prompt_class, m.requests) == ("d", 5, "c4", "mix", 16)
    assert m.tpot_base_s == pytest.approx(0.0425) and m.tpot_spec_s == pytest.approx(0.025)
    assert m.speedup == pytest.approx(base / (spec_a + spec_b)) and m.speedup == pytest.approx(1.7)
    z = 1.959964
    se_a, se_b = (math.log(2.5) - math.log(1.6)) / (2 * z), math.log(1.5625) / (2 * z)
    half = z * math.sqrt((spec_a / 0.025) ** 2 * se_a**2 + (spec_b / 0.025) ** 2 * se_b**2)
    assert m.ci95 == pytest.approx([1.7 * math.exp(-half), 1.7 * math.exp(half)])
    # one class: the mix is that class, with its own interval; no positive weight: no mix
    (one,) = mix_rows(rows[:1], {"a": 1.0})
    assert one.speedup == pytest.approx(2.0) and one.ci95 == [1.6, 2.5]
    assert mix_rows(rows, {"a": 0.0}) == []
    # an interval reaching 0 in one class: the mix has a point but no interval
    (no_ci,) = mix_rows([cls_row("a", 0.04, 2.0, [0.0, 2.5]), rows[1]], {"a": 1.0, "b": 1.0})
    assert no_ci.speedup is not None and no_ci.ci95 is None


def test_a_cell_row_carries_its_summarys_figures(tmp_path: Path) -> None:
    """Each row of the sweep's matrix is one (cell, prompt class) of a run's summary: every field the objectives
    and the report rank by is that class's figure, baseline and speculative each in its place."""
    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["p50:ttft<=1ms", "p50:tpot<=1s"]  # one SLO missed by both variants, one met
    run = make_run(tmp_path, "cell", per_class=8, tokens=40, errors=0, config=cfg)
    summary = ensure_summary(RunFolder(run))
    rows = {r.prompt_class: r for r in build_matrix([CellInput("qwen3-1.7b", 7, "c4", summary)])}
    assert set(rows) == {"structured", "open", "all"}
    for cls, cs in summary.level("c4").scopes():
        r, base, spec, sp = rows[cls], cs.variants["baseline"], cs.variants["speculative"], cs.speedup
        assert sp is not None and sp.tpot_p50 is not None and sp.throughput is not None and sp.ttft_p50 is not None
        assert base.cost is not None and spec.cost is not None and spec.goodput is not None and base.goodput
        assert (r.draft, r.window, r.level, r.prompt_class) == ("qwen3-1.7b", 7, "c4", cls)
        assert (r.speedup, r.ci95) == (sp.tpot_p50.value, list(sp.tpot_p50.ci95 or []))
        assert (r.throughput, r.throughput_ci95) == (sp.throughput.value, list(sp.throughput.ci95 or []))
        assert (r.tpot_base_s, r.tpot_spec_s) == (base.tpot_s.p50, spec.tpot_s.p50)
        assert spec.tpot_s.ci95 is not None and r.tpot_spec_ci95 == list(spec.tpot_s.ci95.p50 or [])
        assert r.requests == sp.paired_requests > 0
        assert (r.usd_base, r.usd_spec) == (
            base.cost.usd_per_million_output_tokens,
            spec.cost.usd_per_million_output_tokens,
        )
        assert r.usd_spec_ci95 == list(spec.cost.usd_per_million_output_tokens_ci95 or [])
        assert (r.slo_base, r.slo_spec) == (False, False)
        assert r.slo_missed is not None and len(r.slo_missed) == 1 and r.slo_missed[0].startswith("p50:ttft<=1ms (")
        assert r.slo_missed[0].endswith(" ms)")
        assert (r.ttft_speedup, r.ttft_speedup_ci95) == (sp.ttft_p50.value, list(sp.ttft_p50.ci95 or []))
        assert (r.ttft_base_s, r.ttft_spec_s) == (base.ttft_s.p50, spec.ttft_s.p50)
        for q in ("p50", "p90", "p95", "p99"):
            assert r.e2e_base_s is not None and r.e2e_base_s[q] == getattr(base.e2e_s, q)
            assert r.e2e_spec_s is not None and r.e2e_spec_s[q] == getattr(spec.e2e_s, q)
        acc = spec.acceptance
        assert acc is not None
        assert (r.length, r.acceptance_rate, r.acceptance_source) == (acc.mean_accepted_length, acc.rate, acc.source)


def explained_row(*, length: float, per_position: list[float] | None, semantics: str = "upstream") -> Row:
    r = row("qwen3-1.7b", 3, 2.0, [1.8, 2.2])
    r.length, r.per_position, r.acceptance_rate, r.tpot_spec_s = length, per_position, 0.6, 0.02
    r.semantics = semantics  # type: ignore[assignment]
    return r


def test_an_explanation_word_for_word_when_acceptance_falls_with_position() -> None:
    """Window 3 (upstream: 3 proposals), acceptance 0.8, 0.6, 0.4 by position, 2.0 tokens a step observed. The
    constant-acceptance formula with a = 0.8 expects (1 - 0.8^4) / 0.2 = 2.952, 48% above what was seen; the
    conditional acceptance falls 0.8 -> 0.6/0.8 = 0.75 -> 0.4/0.6 = 0.67."""
    out = explain_row(explained_row(length=2.0, per_position=[0.8, 0.6, 0.4]), None)
    assert out["first_position"] == 0.8 and out["observed_length"] == 2.0 and out["acceptance_rate"] == 0.6
    assert out["expected_length_first_position"] == pytest.approx(2.952)
    assert out["expected_length_rate"] == pytest.approx((1 - 0.6**4) / 0.4)
    assert out["conditional"] == pytest.approx([0.8, 0.75, 0.4 / 0.6])
    assert (out["cost_ratio"], out["model_tpot_s"], out["measured_tpot_s"]) == (None, None, 0.02)
    note = (
        "observed L = 2.00 is 48% below (1 - a^(p+1))/(1 - a) = 2.95 with a = 0.80 (position 0): the formula assumes "
        "every position is accepted as often as the first, but conditional acceptance falls from 0.80 at position 0 "
        "to 0.67 at position 2, so each extra position of window 3 adds less than the formula says"
    )
    assert out["disagreements"] == [note]
    assert out["text"] == (
        "qwen3-1.7b k3 structured @ c4: L = 2.00 tokens/step, constant-acceptance expectation 2.95. " + note
    )
    # NxDI counts the target's token in the window: 2 proposals, (1 - 0.8^3) / 0.2 = 2.44, and only 2 positions
    nxdi = explain_row(explained_row(length=2.44, per_position=[0.8, 0.6, 0.4], semantics="nxdi"), None)
    assert nxdi["expected_length_first_position"] == pytest.approx(2.44) and nxdi["conditional"] == pytest.approx(
        [0.8, 0.75]
    )
    assert nxdi["disagreements"] == []  # within 10%


def test_an_explanation_when_acceptance_is_bursty_or_missing() -> None:
    above = explain_row(explained_row(length=3.5, per_position=[0.8, 0.6, 0.4]), None)
    assert above["disagreements"] == [
        "observed L = 3.50 is above (1 - a^(p+1))/(1 - a) = 2.95 with a = 0.80: later positions are accepted more "
        "readily than the first (acceptance is bursty)"
    ]
    bare = row("d", 2, None, None, level="c8", cls="open")
    out = explain_row(bare, None)
    assert out["text"] == "d k2 open @ c8: no acceptance data" and out["disagreements"] == []
    assert (out["first_position"], out["expected_length_rate"], out["conditional"]) == (None, None, None)


def test_analyze_sweep_refuses_nothing_to_analyze_and_a_mix_of_unmeasured_classes(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError) as e:
        analyze_sweep([])
    assert str(e.value) == "the sweep has no finished cell to analyze (fix: run `spectrn sweep` first)"
    summary = ensure_summary(RunFolder(make_run(tmp_path, "cell", per_class=4, tokens=24, errors=0)))
    cell = CellInput("qwen3-1.7b", 7, "c4", summary)
    with pytest.raises(ConfigError) as c:
        analyze_sweep([cell], weights={"chat": 1.0, "structured": 1.0})
    assert str(c.value) == (
        "--mix names prompt class(es) ['chat'] that the sweep did not measure (fix: use classes among open, structured)"
    )
    out = analyze_sweep([cell], weights={"structured": 3.0, "open": 1.0})
    assert out["classes"] == ["open", "structured"] and out["levels"] == ["c4"]
    assert out["mix_weights"] == {"structured": 0.75, "open": 0.25}
    assert [r["scope"] for r in out["recommendations"]] == ["open", "structured", "mix"]
    assert out["recommendations"][2]["weights"] == {"structured": 0.75, "open": 0.25}
    assert [r["prompt_class"] for r in out["rows"]] == ["all", "open", "structured", "mix"]
    assert out["crossovers"] == []  # one level: nothing to cross


def test_explanations_fit_each_draft_per_level_and_explain_class_rows_with_acceptance() -> None:
    def measured(draft: str, window: int, cls: str, *, base: float | None, spec: float, length: float | None,
                 level: str = "c4") -> Row:  # fmt: skip
        r = row(draft, window, 2.0, [1.8, 2.2], level=level, cls=cls)
        r.tpot_base_s, r.tpot_spec_s, r.length = base, spec, length
        return r

    rows = [
        # qwen3-1.7b at c4: baseline step 40 ms; steps of 40 + 5k ms at windows 3 and 5 (TPOT = step / L)
        measured("qwen3-1.7b", 3, "structured", base=0.040, spec=0.055 / 2.5, length=2.5),
        measured("qwen3-1.7b", 5, "structured", base=0.040, spec=0.065 / 3.25, length=3.25),
        measured("qwen3-1.7b", 5, "all", base=0.040, spec=0.065 / 3.0, length=3.0),  # pooled: no explanation
        measured("qwen3-1.7b", 3, "open", base=0.040, spec=0.03, length=None),  # no acceptance: no explanation
        # qwen3-0.6b at c16: one window, no baseline: nothing to fit a line to
        measured("qwen3-0.6b", 3, "open", base=None, spec=0.02, length=1.5, level="c16"),
    ]
    out = explain(rows)
    fits = out["cost_fits"]
    assert [(f["draft"], f["level"]) for f in fits] == [("qwen3-0.6b", "c16"), ("qwen3-1.7b", "c4")]
    assert fits[0]["error"] == "fewer than two windows measured"
    assert "error" not in fits[1]
    cells = out["cells"]
    assert [(c["draft"], c["window"], c["prompt_class"]) for c in cells] == [
        ("qwen3-0.6b", 3, "open"), ("qwen3-1.7b", 3, "structured"), ("qwen3-1.7b", 5, "structured")
    ]  # fmt: skip
    assert cells[0]["cost_ratio"] is None and cells[0]["model_tpot_s"] is None
    # 5 ms a window token over a 40 ms target step: 0.125 target steps each
    assert cells[1]["cost_ratio"] == pytest.approx(0.125) and cells[2]["cost_ratio"] == pytest.approx(0.125)
    assert cells[1]["model_tpot_s"] == pytest.approx(0.055 / 2.5)
    assert cells[2]["text"] == (
        "qwen3-1.7b k5 structured @ c4: L = 3.25 tokens/step, each window token costs 0.125 target steps"
    )
