"""``compare_runs`` on two runs whose summaries are written here by hand: every p50 row (its unit, A and B in
their places, B / A), the speedups side by side with their own intervals, which levels are paired when the runs
share none, and the warnings on figures that do not mean the same thing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.report.compare import compare_runs
from spectrn.run.summary import (
    ClassSummary,
    LevelSummary,
    Load,
    Provenance,
    Requests,
    Speedup,
    Speedups,
    Stats,
    Summary,
    Throughput,
    VariantSummary,
    Verdict,
)


def _variant(ttft: float, tpot: float, tput: float) -> VariantSummary:
    """Means unlike the medians (2x), so a row that shows the wrong figure is caught."""
    s = lambda x: Stats(n=4, p50=x, mean=x * 2)  # noqa: E731
    return VariantSummary(
        ttft_s=s(ttft), tpot_s=s(tpot), itl_s=s(tpot), e2e_s=s(ttft + 100 * tpot), chunk_latency_s=s(tpot),
        llmperf_itl_s=s(tpot), output_tokens_per_s=Throughput(per_request=s(tput)), output_tokens=s(100),
        requests=Requests(completed=4),
    )  # fmt: skip


def _level(label: str, tpot_b: float, tpot_s: float, speedup: Speedup) -> LevelSummary:
    return LevelSummary(
        load=Load.parse(label),
        variants={"baseline": _variant(0.2, tpot_b, 20.0), "speculative": _variant(0.25, tpot_s, 50.0)},
        speedup=Speedups(tpot_p50=speedup),
        by_prompt_class={"open": ClassSummary()},
    )


def _run(root: Path, run_id: str, summary: Summary) -> Path:
    folder = make_run(root, run_id, summary=False, per_class=3, errors=0)
    (folder / "summary.json").write_text(summary.model_dump_json(), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def cmp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("runs")
    a = Summary(
        run_id="a", verdict=Verdict(clean=True, performance=True), provenance=Provenance(runtime="sim"),
        levels=[_level("c4", 0.04, 0.02, Speedup(value=2.0, ci95=(1.9, 2.1)))],
    )  # fmt: skip
    b = Summary(
        run_id="b", verdict=Verdict(clean=True, performance=True),
        provenance=Provenance(runtime="sim", time_scale=10.0, rescaled=True),
        levels=[_level("c8", 0.05, 0.04, Speedup(value=1.25, ci95=(1.2, 1.3))),
                _level("c16", 0.08, 0.08, Speedup(value=1.0, ci95=(0.9, 1.1)))],
    )  # fmt: skip
    return compare_runs(_run(root, "a", a), _run(root, "b", b))


def test_runs_without_a_common_level_compare_their_first_levels(cmp: dict[str, Any]) -> None:
    assert cmp["pairs"] == [["c4", "c8"]]
    assert {r["level"] for r in cmp["rows"]} == {"c4 vs c8"}


def test_a_different_time_scale_is_a_warning(cmp: dict[str, Any]) -> None:
    assert cmp["provenance_differences"]["time scale"] == [1.0, 10.0]
    assert cmp["warnings"] == [
        "the runs differ in time scale (1.0 vs 10.0): their figures are not comparable as performance results; "
        "compare speedups within each run only"
    ]


def test_every_p50_row_has_a_and_b_in_the_shown_unit_and_b_over_a(cmp: dict[str, Any]) -> None:
    rows = {(r["prompt_class"], r["variant"], r["metric"]): r for r in cmp["rows"]}
    # baseline TPOT 0.04 s (A) and 0.05 s (B): 40.0 and 50.0 ms, B / A = 1.25
    tpot = rows[("all", "baseline", "TPOT p50")]
    assert (tpot["unit"], tpot["a"], tpot["b"]) == ("ms", pytest.approx(40.0), pytest.approx(50.0))
    assert tpot["ratio"] == pytest.approx(1.25)
    # speculative TPOT 0.02 -> 0.04 s: B / A = 2.0
    assert rows[("all", "speculative", "TPOT p50")]["ratio"] == pytest.approx(2.0)
    ttft = rows[("all", "speculative", "TTFT p50")]  # 0.25 s in both runs: 250 ms, ratio 1
    assert (ttft["a"], ttft["b"], ttft["ratio"]) == (pytest.approx(250.0), pytest.approx(250.0), pytest.approx(1.0))
    tput = rows[("all", "speculative", "tok/s per request p50")]  # the per-request median, not the mean (100)
    assert (tput["unit"], tput["a"], tput["b"]) == ("tok/s", 50.0, 50.0)
    # a class only one side measured has no figures
    assert rows[("open", "baseline", "TPOT p50")]["a"] is None


def test_speedups_are_listed_side_by_side_with_each_runs_own_interval(cmp: dict[str, Any]) -> None:
    sp = next(r for r in cmp["speedups"] if r["prompt_class"] == "all" and r["metric"].startswith("TPOT p50"))
    assert (sp["a"], sp["a_ci95"], sp["b"], sp["b_ci95"]) == (2.0, [1.9, 2.1], 1.25, [1.2, 1.3])
