"""The sweep objective's decisions pinned whole on hand-made rows (``spectrn.sweep.objective``).

Every expected text and value below is written out by hand from the rules in the module's docstring: the
cheapest eligible cell per level, a tie within the best's interval going to the smaller window, the baseline
winning when it is no worse, capacity as the highest level meeting the SLOs (c32 above c4, not by string order).
"""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.errors import ConfigError
from spectrn.sweep.objective import decide, parse_objective, ttft_note
from spectrn.sweep.recommend import _cheaper

DRAFT = "qwen3-1.7b"
MISSED = ["p90:tpot<=30ms (41 ms)"]


def row(window: int, level: str, usd: float | None, met: bool | None, **extra: Any) -> dict[str, Any]:
    """A pooled row (``Row.to_dict()``) with the figures the objectives read; TTFT does not regress."""
    out: dict[str, Any] = {
        "draft": DRAFT, "window": window, "level": level, "prompt_class": "all",
        "usd_spec": usd, "usd_spec_ci95": None if usd is None else [usd - 0.1, usd + 0.1],
        "usd_base": 9.0, "slo_spec": met, "slo_base": True, "slo_missed": None if met else MISSED,
        "ttft_speedup": 1.0, "ttft_speedup_ci95": [0.9, 1.1], "ttft_spec_s": 0.2, "ttft_base_s": 0.2,
        "e2e_spec_s": {"p90": 2.0, "p99": 3.0}, "e2e_base_s": {"p90": 5.0, "p99": 6.0},
    }  # fmt: skip
    return {**out, **extra}


def by(rows: list[dict[str, Any]], name: str, levels: list[str], pct: str = "p90") -> dict[str, Any]:
    return decide(rows, (name, pct), levels, recs=[], cheaper=_cheaper)


def test_cost_picks_the_cheapest_eligible_cell_per_level_and_names_the_ineligible() -> None:
    rows = [
        row(3, "c8", 4.0, True),
        row(7, "c8", 5.0, True),
        row(5, "c8", 2.0, False, draft="qwen3-0.6b"),  # cheapest, but misses: not eligible
        row(3, "c8", 1.0, True, prompt_class="structured"),  # a prompt class's row: not the service's cost
        row(4, "c8", 3.0, True, usd_base=8.0, slo_base=False),  # its baseline misses: $8 is not the baseline's
        row(3, "c16", 6.5, True),
        row(4, "c16", None, True),  # no cost measured: not a candidate
    ]
    out = by(rows, "cost", ["c8", "c16"])
    assert (out["name"], out["percentile"], out["chosen_by"], out["slos"]) == ("cost", None, "given", True)
    assert out["rule"] == "lowest $/M output tokens (speculative) among cells meeting every percentile SLO"
    c8, c16 = out["recommendations"]
    assert c8 == {
        "level": "c8",
        "chosen": {"draft": DRAFT, "window": 4},
        "value": 3.0,
        "text": "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k4 at $3.00/M; baseline $9.00/M (not eligible, "
        "missing the SLOs: qwen3-0.6b k5)",
        "ineligible": [{"draft": "qwen3-0.6b", "window": 5, "level": "c8", "missed": MISSED}],
        "ttft_regression": None,
    }
    assert c16 == {
        "level": "c16",
        "chosen": {"draft": DRAFT, "window": 3},
        "value": 6.5,
        "text": "@ c16, by $/M output tokens at the SLO: qwen3-1.7b k3 at $6.50/M; baseline $9.00/M",
        "ineligible": [],
        "ttft_regression": None,
    }
    # the cheapest across levels: k4 at c8 ($3.00 < $6.50); the baseline's cheapest meeting the SLOs: $9.00 at c8
    assert (
        out["overall"] == "cheapest within the SLOs: qwen3-1.7b k4 at c8, $3.00/M; baseline's cheapest: $9.00/M at c8"
    )


def test_overall_cost_names_the_level_of_the_cheapest_baseline() -> None:
    rows = [row(3, "c8", 4.0, True, usd_base=9.5), row(3, "c16", 5.0, True, usd_base=7.25)]
    out = by(rows, "cost", ["c8", "c16"])
    assert (
        out["overall"] == "cheapest within the SLOs: qwen3-1.7b k3 at c8, $4.00/M; baseline's cheapest: $7.25/M at c16"
    )


def test_a_cost_within_the_best_interval_ties_and_the_smaller_window_wins_even_at_the_bound() -> None:
    # best k7 at $4.00, interval [3.90, 4.10]: k2 at exactly $4.10 ties (<= the bound) and is the cheaper
    # configuration; k1 at $4.11 is beyond the bound.
    rows = [row(7, "c8", 4.0, True), row(2, "c8", 4.1, True), row(1, "c8", 4.11, True), row(9, "c8", 4.05, True)]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 2} and rec["value"] == 4.1
    assert rec["text"] == (
        "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k2 at $4.10/M (ties with the best, qwen3-1.7b k7 at "
        "$4.00/M: the cheaper configuration wins); baseline $9.00/M"
    )


def test_a_tie_between_drafts_at_one_window_goes_to_the_smaller_draft() -> None:
    rows = [row(5, "c8", 4.0, True), row(5, "c8", 4.05, True, draft="qwen3-0.6b")]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec["chosen"] == {"draft": "qwen3-0.6b", "window": 5}
    assert "qwen3-0.6b k5 at $4.05/M (ties with the best, qwen3-1.7b k5 at $4.00/M" in rec["text"]


def test_equal_costs_without_an_interval_pick_the_cheaper_configuration_as_the_best() -> None:
    rows = [row(7, "c8", 4.0, True, usd_spec_ci95=None), row(3, "c8", 4.0, True, usd_spec_ci95=None)]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 3}
    assert rec["text"] == "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k3 at $4.00/M; baseline $9.00/M"


def test_a_baseline_as_cheap_as_the_best_cell_wins() -> None:
    rows = [row(3, "c8", 4.0, True, usd_base=4.0), row(5, "c8", 2.0, False)]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec == {
        "level": "c8",
        "chosen": None,
        "text": "@ c8, by $/M output tokens at the SLO: serve without speculation: the baseline's $4.00/M is no worse "
        "than the best configuration, qwen3-1.7b k3 at $4.00/M (not eligible, missing the SLOs: qwen3-1.7b k5)",
        "ineligible": [{"draft": DRAFT, "window": 5, "level": "c8", "missed": MISSED}],
        "ttft_regression": None,
    }


def test_a_baseline_a_cent_dearer_loses() -> None:
    (rec,) = by([row(3, "c8", 4.0, True, usd_base=4.01)], "cost", ["c8"])["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 3}
    assert rec["text"] == "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k3 at $4.00/M; baseline $4.01/M"


def test_when_no_cell_meets_the_slos_the_baseline_that_does_is_recommended() -> None:
    rows = [row(3, "c8", 4.0, False, slo_missed=None), row(5, "c8", 2.0, False, slo_base=False, usd_base=1.0)]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec == {
        "level": "c8",
        "chosen": None,
        "text": "@ c8, by $/M output tokens at the SLO: no configuration meets the SLOs (not eligible, missing the "
        "SLOs: qwen3-1.7b k3, qwen3-1.7b k5); the baseline does ($9.00/M): serve without speculation",
        "ineligible": [
            {"draft": DRAFT, "window": 3, "level": "c8", "missed": ["not judged"]},
            {"draft": DRAFT, "window": 5, "level": "c8", "missed": MISSED},
        ],
        "ttft_regression": None,
    }
    assert by(rows, "cost", ["c8"])["overall"] == "baseline's cheapest: $9.00/M at c8"


def test_when_nothing_meets_the_slos_there_is_no_overall_and_no_baseline_text() -> None:
    rows = [row(3, "c8", 4.0, False, slo_base=False)]
    out = by(rows, "cost", ["c8"])
    assert out["recommendations"][0]["text"] == (
        "@ c8, by $/M output tokens at the SLO: no configuration meets the SLOs (not eligible, missing the SLOs: "
        "qwen3-1.7b k3)"
    )
    assert out["overall"] is None


def test_a_baseline_missing_the_slos_is_said() -> None:
    (rec,) = by([row(3, "c8", 4.0, True, slo_base=False)], "cost", ["c8"])["recommendations"]
    assert (
        rec["text"] == "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k3 at $4.00/M; the baseline misses the SLOs"
    )


def test_without_slos_every_cell_is_eligible_and_cost_is_plain() -> None:
    rows = [row(3, "c8", 4.0, None, slo_base=None, slo_missed=None), row(5, "c8", 2.0, None, slo_base=None)]
    out = by(rows, "cost", ["c8"])
    assert out["slos"] is False
    (rec,) = out["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 5} and rec["ineligible"] == []
    assert rec["text"] == "@ c8, by $/M output tokens: qwen3-1.7b k5 at $2.00/M; baseline $9.00/M"
    no_base = [{**r, "usd_base": None} for r in rows]
    assert (
        by(no_base, "cost", ["c8"])["recommendations"][0]["text"]
        == "@ c8, by $/M output tokens: qwen3-1.7b k5 at $2.00/M"
    )


def test_e2e_at_a_percentile_picks_the_lowest_latency_against_the_baseline() -> None:
    rows = [
        row(3, "c8", 4.0, True, e2e_spec_s={"p90": 1.0, "p99": 2.5}, e2e_base_s={"p99": 4.0}),
        row(7, "c8", 5.0, True, e2e_spec_s={"p90": 3.0, "p99": 2.25}, e2e_base_s={"p99": 3.5}),
        row(5, "c8", 1.0, False, e2e_spec_s={"p90": 0.5, "p99": 1.0}, e2e_base_s={"p99": 1.5}),
        row(9, "c8", 1.0, True, e2e_spec_s={"p90": 0.5, "p99": None}),
    ]
    out = by(rows, "e2e", ["c8"], "p99")
    assert (out["name"], out["percentile"]) == ("e2e", "p99")
    assert out["rule"] == "lowest speculative e2e latency at p99 among cells meeting every percentile SLO"
    assert "overall" not in out
    (rec,) = out["recommendations"]
    # k7's 2.25 s beats k3's 2.5 s; k5 misses (its 1.0 s does not count) and k9 has no p99; the baseline: the
    # lowest p99 among rows whose baseline meets the SLOs, 1.5 s (k5's baseline meets them)
    assert rec == {
        "level": "c8",
        "chosen": None,
        "text": "@ c8, by e2e p99: serve without speculation: the baseline's 1.50 s is no worse than the best "
        "configuration, qwen3-1.7b k7 at 2.25 s (not eligible, missing the SLOs: qwen3-1.7b k5)",
        "ineligible": [{"draft": DRAFT, "window": 5, "level": "c8", "missed": MISSED}],
        "ttft_regression": None,
    }
    faster = [r for r in rows if r["window"] != 5]
    (rec,) = by(faster, "e2e", ["c8"], "p99")["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 7} and rec["value"] == 2.25
    assert rec["text"] == "@ c8, by e2e p99: qwen3-1.7b k7 at 2.25 s; baseline 3.50 s"


def test_capacity_is_the_highest_level_meeting_the_slos_by_load_not_by_name() -> None:
    rows = [
        row(3, "c4", 4.0, True), row(3, "c16", 4.0, True), row(3, "c32", 4.0, False),
        row(7, "c4", 4.0, True), row(7, "c32", 4.0, True, ttft_speedup=0.75, ttft_speedup_ci95=[0.7, 0.8],
                                                       ttft_spec_s=0.25, ttft_base_s=0.2),
        row(5, "c4", 4.0, False), row(5, "c32", 4.0, False),
        row(9, "c8", 4.0, True, slo_base=False), row(9, "c16", 4.0, False, slo_base=False),
    ]  # fmt: skip
    rows = [{**r, "slo_base": r["level"] == "c4"} for r in rows]
    out = by(rows, "capacity", ["c4", "c8", "c16", "c32"])
    assert out["rule"] == "highest load level at which the speculative variant meets every percentile SLO"
    note = ("TTFT regresses: speculative TTFT p50 is worse than the baseline's (250.0 ms vs 200.0 ms), baseline / "
            "speculative 0.75x, CI [0.70, 0.80] below 1")  # fmt: skip
    assert out["recommendations"] == [
        {
            "level": "c32",
            "chosen": {"draft": DRAFT, "window": 7},
            "text": "by capacity at the SLO: qwen3-1.7b k7 meets the SLOs up to c32; baseline up to c4 (meets the "
            f"SLOs at no measured level: qwen3-1.7b k5); {note}",
            "ineligible": [],
            "ttft_regression": note,
        }
    ]


def test_capacity_ties_go_to_the_cheaper_configuration() -> None:
    rows = [row(9, "c4", 4.0, True), row(9, "c16", 4.0, True), row(3, "c16", 4.0, True), row(3, "c4", 4.0, True)]
    (rec,) = by([{**r, "slo_base": False} for r in rows], "capacity", ["c4", "c16"])["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 3}
    assert rec["text"] == (
        "by capacity at the SLO: qwen3-1.7b k3 meets the SLOs up to c16; the baseline meets them at no measured level"
    )


def test_capacity_goes_to_the_baseline_when_it_reaches_as_high() -> None:
    rows = [row(3, "c4", 4.0, True), row(3, "c16", 4.0, True, slo_base=True), row(5, "c16", 4.0, False)]
    (rec,) = by(rows, "capacity", ["c4", "c16"])["recommendations"]
    assert rec == {
        "level": "c16",
        "chosen": None,
        "text": "by capacity at the SLO: serve without speculation: baseline up to c16, no configuration higher "
        "(best qwen3-1.7b k3 up to c16) (meets the SLOs at no measured level: qwen3-1.7b k5)",
        "ineligible": [],
        "ttft_regression": None,
    }


def test_capacity_without_any_cell_meeting_or_without_slos() -> None:
    rows = [row(3, "c4", 4.0, False, slo_base=False)]
    (rec,) = by(rows, "capacity", ["c4"])["recommendations"]
    assert rec == {
        "level": None,
        "chosen": None,
        "text": "by capacity at the SLO: no configuration meets the SLOs at any measured level; the baseline meets "
        "them at no measured level (meets the SLOs at no measured level: qwen3-1.7b k3)",
        "ineligible": [],
        "ttft_regression": None,
    }
    unjudged = [row(3, "c4", 4.0, None, slo_base=None)]
    (rec,) = by(unjudged, "capacity", ["c4"])["recommendations"]
    assert rec["text"] == "by capacity at the SLO: no percentile SLO was judged, so no capacity (set --slo)"
    assert rec["chosen"] is None and rec["level"] is None


def test_the_default_objective_and_why_it_was_chosen() -> None:
    judged = [row(3, "c8", 4.0, True)]
    base_only = [row(3, "c8", 4.0, None, slo_base=False)]  # only the baseline judged: SLOs are still set
    unjudged = [row(3, "c8", 4.0, None, slo_base=None)]
    class_only = [row(3, "c8", 4.0, True, prompt_class="code"), *unjudged]  # a class's verdict is not the service's
    for rows, name, why in [
        (judged, "cost", "default: SLOs are set"),
        (base_only, "cost", "default: SLOs are set"),
        (unjudged, "tpot", "default: no percentile SLO is set"),
        (class_only, "tpot", "default: no percentile SLO is set"),
    ]:
        out = decide(rows, None, ["c8"], recs=[], cheaper=_cheaper)
        assert (out["name"], out["chosen_by"], out["percentile"]) == (name, why, None)


def test_tpot_passes_the_speedup_texts_through_with_the_ttft_note() -> None:
    chosen = row(3, "c8", 4.0, True, ttft_speedup=0.5, ttft_speedup_ci95=[0.4, 0.6], ttft_spec_s=0.4, ttft_base_s=0.2)
    recs = [
        {"level": "c8", "scope": "all", "text": "qwen3-1.7b k3, 1.50x", "chosen": chosen},
        {"level": "c16", "scope": "all", "text": "no speedup", "chosen": None},
    ]
    out = decide([row(3, "c8", 4.0, True)], ("tpot", "p90"), ["c8", "c16"], recs=recs, cheaper=_cheaper)
    note = ("TTFT regresses: speculative TTFT p50 is worse than the baseline's (400.0 ms vs 200.0 ms), baseline / "
            "speculative 0.50x, CI [0.40, 0.60] below 1")  # fmt: skip
    assert out["rule"] == "largest TPOT p50 speedup (baseline / speculative) with its CI above 1"
    assert out["recommendations"] == [
        {"level": "c8", "scope": "all", "text": f"by TPOT p50 speedup: qwen3-1.7b k3, 1.50x; {note}",
         "chosen": {"draft": DRAFT, "window": 3}, "ineligible": [], "ttft_regression": note},
        {"level": "c16", "scope": "all", "text": "by TPOT p50 speedup: no speedup", "chosen": None,
         "ineligible": [], "ttft_regression": None},
    ]  # fmt: skip


def test_ttft_regresses_only_when_the_whole_interval_is_below_one() -> None:
    assert ttft_note(None) is None
    assert ttft_note({"ttft_speedup_ci95": None}) is None
    assert ttft_note({"ttft_speedup": 0.9, "ttft_speedup_ci95": [0.8, 1.0]}) is None  # touches 1: not beyond
    text = ttft_note({"ttft_speedup": 0.9, "ttft_speedup_ci95": [0.8, 0.99]})
    assert text == ("TTFT regresses: speculative TTFT p50 is worse than the baseline's, baseline / speculative "
                    "0.90x, CI [0.80, 0.99] below 1")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "parsed"),
    [(None, None), ("cost", ("cost", "p90")), (" E2E:P99 ", ("e2e", "p99")), ("e2e", ("e2e", "p90")),
     ("capacity", ("capacity", "p90")), ("tpot", ("tpot", "p90")), ("e2e:p50", ("e2e", "p50"))],
)  # fmt: skip
def test_objectives_parse_to_a_name_and_an_e2e_percentile(text: str | None, parsed: tuple[str, str] | None) -> None:
    assert parse_objective(text) == parsed


@pytest.mark.parametrize("bad", ["capacity:p90", "tpot:p50", "e2e:p75", ""])
def test_a_percentile_on_another_objective_or_an_unknown_one_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="is not an objective") as e:
        parse_objective(bad)
    assert e.value.hint == "use cost, capacity, tpot, e2e or e2e:p50|p90|p95|p99 (docs/sweeps.md)"


def test_an_unjudged_cell_in_a_judged_sweep_is_not_eligible() -> None:
    # slo_spec None: the cell's SLOs were not judged (e.g. too few samples); only True is eligible
    rows = [row(3, "c8", 4.0, True), row(5, "c8", 2.0, None, slo_missed=None)]
    (rec,) = by(rows, "cost", ["c8"])["recommendations"]
    assert rec["chosen"] == {"draft": DRAFT, "window": 3}
    assert rec["ineligible"] == [{"draft": DRAFT, "window": 5, "level": "c8", "missed": ["not judged"]}]
    cap = [row(3, "c4", 4.0, True, slo_base=False), row(5, "c16", 4.0, None, slo_base=False)]
    (rec,) = by(cap, "capacity", ["c4", "c16"])["recommendations"]
    assert rec["text"] == (
        "by capacity at the SLO: qwen3-1.7b k3 meets the SLOs up to c4; the baseline meets them at no measured "
        "level (meets the SLOs at no measured level: qwen3-1.7b k5)"
    )


def test_the_e2e_baseline_counts_only_where_the_baseline_meets_the_slos() -> None:
    # k5's baseline p99 (0.5 s) would beat k3's 2.5 s, but k5's baseline misses the SLOs: the baseline is 4.0 s
    rows = [
        row(3, "c8", 4.0, True, e2e_spec_s={"p99": 2.5}, e2e_base_s={"p99": 4.0}),
        row(5, "c8", 4.0, False, e2e_spec_s={"p99": 2.0}, e2e_base_s={"p99": 0.5}, slo_base=False),
    ]
    (rec,) = by(rows, "e2e", ["c8"], "p99")["recommendations"]
    assert rec["text"] == (
        "@ c8, by e2e p99: qwen3-1.7b k3 at 2.50 s; baseline 4.00 s (not eligible, missing the SLOs: qwen3-1.7b k5)"
    )
