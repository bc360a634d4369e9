"""The sweep objective's decisions where earlier tests left a change unseen (``spectrn.sweep.objective``).

Each test pins one user-visible outcome whole, written out by hand: the record capacity returns without SLOs,
the list of configurations that never meet the SLOs, every level decided after a level without a winner, the
default objective when only the speculative variant was judged, a cost interval whose upper bound lies below
its point estimate, and the TTFT note when one variant's TTFT p50 is missing.
"""

from __future__ import annotations

from typing import Any

from spectrn.sweep.objective import decide, ttft_note
from spectrn.sweep.recommend import _cheaper

DRAFT = "qwen3-1.7b"
MISSED = ["p90:tpot<=30ms (41 ms)"]


def row(window: int, level: str, usd: float, met: bool | None, **extra: Any) -> dict[str, Any]:
    """A pooled row (``Row.to_dict()``): cost within +-0.10, baseline $9.00/M meeting the SLOs, no TTFT regression."""
    out: dict[str, Any] = {
        "draft": DRAFT, "window": window, "level": level, "prompt_class": "all",
        "usd_spec": usd, "usd_spec_ci95": [usd - 0.1, usd + 0.1], "usd_base": 9.0,
        "slo_spec": met, "slo_base": True, "slo_missed": None if met else MISSED,
        "ttft_speedup": 1.0, "ttft_speedup_ci95": [0.9, 1.1], "ttft_spec_s": 0.2, "ttft_base_s": 0.2,
        "e2e_spec_s": {"p90": 2.0}, "e2e_base_s": {"p90": 5.0},
    }  # fmt: skip
    return {**out, **extra}


def by(rows: list[dict[str, Any]], name: str, levels: list[str]) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = decide(rows, (name, "p90"), levels, recs=[], cheaper=_cheaper)["recommendations"]
    return recs


def test_capacity_without_slos_returns_the_whole_record_with_no_choice() -> None:
    rows = [row(3, "c4", 4.0, None, slo_base=None)]
    assert by(rows, "capacity", ["c4"]) == [
        {
            "level": None,
            "chosen": None,
            "ineligible": [],
            "ttft_regression": None,
            "text": "by capacity at the SLO: no percentile SLO was judged, so no capacity (set --slo)",
        }
    ]


def test_capacity_lists_every_configuration_that_never_meets_the_slos_comma_separated() -> None:
    rows = [
        row(3, "c4", 4.0, True, slo_base=False),
        row(5, "c4", 4.0, False, slo_base=False),
        row(7, "c4", 4.0, False, slo_base=False),
    ]
    (rec,) = by(rows, "capacity", ["c4"])
    assert rec["text"] == (
        "by capacity at the SLO: qwen3-1.7b k3 meets the SLOs up to c4; the baseline meets them at no measured "
        "level (meets the SLOs at no measured level: qwen3-1.7b k5, qwen3-1.7b k7)"
    )


def test_a_level_where_no_cell_meets_the_slos_does_not_stop_the_later_levels() -> None:
    rows = [row(3, "c8", 4.0, False, slo_base=False), row(3, "c16", 5.0, True)]
    assert by(rows, "cost", ["c8", "c16"]) == [
        {
            "level": "c8",
            "chosen": None,
            "text": "@ c8, by $/M output tokens at the SLO: no configuration meets the SLOs (not eligible, missing "
            "the SLOs: qwen3-1.7b k3)",
            "ineligible": [{"draft": DRAFT, "window": 3, "level": "c8", "missed": MISSED}],
            "ttft_regression": None,
        },
        {
            "level": "c16",
            "chosen": {"draft": DRAFT, "window": 3},
            "value": 5.0,
            "text": "@ c16, by $/M output tokens at the SLO: qwen3-1.7b k3 at $5.00/M; baseline $9.00/M",
            "ineligible": [],
            "ttft_regression": None,
        },
    ]


def test_a_level_won_by_the_baseline_does_not_stop_the_later_levels() -> None:
    rows = [row(3, "c8", 4.0, True, e2e_base_s={"p90": 1.5}), row(3, "c16", 5.0, True, e2e_spec_s={"p90": 2.5})]
    assert by(rows, "e2e", ["c8", "c16"]) == [
        {
            "level": "c8",
            "chosen": None,
            "text": "@ c8, by e2e p90: serve without speculation: the baseline's 1.50 s is no worse than the best "
            "configuration, qwen3-1.7b k3 at 2.00 s",
            "ineligible": [],
            "ttft_regression": None,
        },
        {
            "level": "c16",
            "chosen": {"draft": DRAFT, "window": 3},
            "value": 2.5,
            "text": "@ c16, by e2e p90: qwen3-1.7b k3 at 2.50 s; baseline 5.00 s",
            "ineligible": [],
            "ttft_regression": None,
        },
    ]


def test_a_cost_interval_below_its_estimate_makes_no_tie_and_the_lowest_cost_wins() -> None:
    # k3's $4.00 has the interval [3.00, 3.50] (a bootstrap interval need not contain the estimate): no cell,
    # k3 itself included, is within it, so the lowest cost is chosen without any tie
    rows = [row(3, "c8", 4.0, True, usd_spec_ci95=[3.0, 3.5]), row(1, "c8", 4.5, True)]
    (rec,) = by(rows, "cost", ["c8"])
    assert rec["chosen"] == {"draft": DRAFT, "window": 3}
    assert rec["text"] == "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k3 at $4.00/M; baseline $9.00/M"


def test_slos_judged_for_the_speculative_variant_only_still_default_to_cost() -> None:
    rows = [row(3, "c8", 4.0, True, slo_base=None)]
    out = decide(rows, None, ["c8"], recs=[], cheaper=_cheaper)
    assert (out["name"], out["chosen_by"], out["slos"]) == ("cost", "default: SLOs are set", True)
    assert out["recommendations"][0]["text"] == (
        "@ c8, by $/M output tokens at the SLO: qwen3-1.7b k3 at $4.00/M; the baseline misses the SLOs"
    )


def test_the_ttft_note_gives_no_times_when_one_variant_has_no_ttft_p50() -> None:
    note = (
        "TTFT regresses: speculative TTFT p50 is worse than the baseline's, baseline / speculative 0.80x, "
        "CI [0.70, 0.90] below 1"
    )
    regress = {"ttft_speedup": 0.8, "ttft_speedup_ci95": [0.7, 0.9]}
    assert ttft_note({**regress, "ttft_spec_s": 0.25, "ttft_base_s": None}) == note
    assert ttft_note({**regress, "ttft_spec_s": None, "ttft_base_s": 0.2}) == note
