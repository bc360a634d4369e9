"""Sweep objectives: the decision by $/M at the SLO, capacity, TPOT or e2e (``spectrn.sweep.objective``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from spectrn.cli.show import print_sweep_analysis
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError
from spectrn.report.sweep import write_report
from spectrn.run.summary import Summary
from spectrn.sweep.objective import decide, parse_objective
from spectrn.sweep.orchestrate import Sweep, SweepOptions
from spectrn.sweep.recommend import Row, _cheaper, recommend

from .conftest import FakeRunner


def row(window: int, level: str, *, speedup: float, usd: float, met: bool | None, e2e_p90: float,
        ttft_ci: tuple[float, float] = (0.95, 1.05)) -> Row:  # fmt: skip
    """A pooled row as build_matrix makes it, with the figures the objectives read."""
    return Row(
        draft="qwen3-1.7b", window=window, level=level, prompt_class="all", speedup=speedup,
        ci95=[speedup - 0.05, speedup + 0.05], tpot_base_s=0.05, tpot_spec_s=0.05 / speedup,
        usd_spec=usd, usd_spec_ci95=[usd * 0.98, usd * 1.02], usd_base=9.0, slo_spec=met, slo_base=False,
        slo_missed=None if met else ["p90:tpot<=30ms (41 ms)"], ttft_speedup=sum(ttft_ci) / 2,
        ttft_speedup_ci95=list(ttft_ci), ttft_base_s=0.2, ttft_spec_s=0.2 / (sum(ttft_ci) / 2),
        e2e_spec_s={"p50": e2e_p90 * 0.8, "p90": e2e_p90, "p95": None, "p99": None}, e2e_base_s={"p90": 5.0},
    )  # fmt: skip


def test_the_objective_changes_the_winner_on_hand_made_rows() -> None:
    # k7: the largest TPOT speedup; k3: the cheapest $/M within the SLO (and the lowest e2e p90); k9: cheaper
    # still, but it misses the SLO, so it is not eligible.
    rows = [
        row(7, "c8", speedup=2.0, usd=6.0, met=True, e2e_p90=3.0),
        row(3, "c8", speedup=1.5, usd=4.0, met=True, e2e_p90=2.0, ttft_ci=(0.7, 0.8)),
        row(9, "c8", speedup=1.8, usd=2.0, met=False, e2e_p90=1.0),
    ]
    dicts = [r.to_dict() for r in rows]
    recs = [recommend(rows, "all", "c8").to_dict()]
    by = {name: decide(dicts, (name, "p90"), ["c8"], recs=recs, cheaper=_cheaper) for name in ("tpot", "cost", "e2e")}
    assert by["tpot"]["recommendations"][0]["chosen"]["window"] == 7
    cost = by["cost"]["recommendations"][0]
    assert cost["chosen"]["window"] == 3 and cost["value"] == 4.0
    assert [m["window"] for m in cost["ineligible"]] == [9]
    assert "by $/M output tokens at the SLO" in cost["text"] and "not eligible" in cost["text"]
    assert cost["ttft_regression"] is not None and "TTFT regresses" in cost["text"]  # CI [0.7, 0.8] below 1
    assert by["e2e"]["recommendations"][0]["chosen"]["window"] == 3  # k9's 1.0 s does not count: it misses
    # SLOs judged and no objective given: cost is the default
    assert decide(dicts, None, ["c8"], recs=recs, cheaper=_cheaper)["name"] == "cost"
    unjudged = [{**d, "slo_spec": None, "slo_base": None} for d in dicts]
    assert decide(unjudged, None, ["c8"], recs=recs, cheaper=_cheaper)["name"] == "tpot"


def test_capacity_objective_picks_the_highest_level_meeting_the_slos() -> None:
    rows = [
        row(3, "c4", speedup=1.5, usd=4.0, met=True, e2e_p90=2.0),
        row(3, "c16", speedup=1.2, usd=3.0, met=False, e2e_p90=2.0),
        row(7, "c4", speedup=2.0, usd=6.0, met=True, e2e_p90=3.0),
        row(7, "c16", speedup=1.8, usd=5.0, met=True, e2e_p90=3.0),
    ]
    out = decide([r.to_dict() for r in rows], ("capacity", "p90"), ["c4", "c16"], recs=[], cheaper=_cheaper)
    (rec,) = out["recommendations"]
    assert rec["chosen"] == {"draft": "qwen3-1.7b", "window": 7} and rec["level"] == "c16"


def test_a_tie_within_the_cost_interval_goes_to_the_cheaper_configuration() -> None:
    rows = [row(7, "c8", speedup=2.0, usd=4.0, met=True, e2e_p90=3.0),
            row(3, "c8", speedup=1.5, usd=4.05, met=True, e2e_p90=2.0)]  # fmt: skip
    (rec,) = decide([r.to_dict() for r in rows], ("cost", "p90"), ["c8"], recs=[], cheaper=_cheaper)["recommendations"]
    assert rec["chosen"]["window"] == 3 and "the cheaper configuration wins" in rec["text"]


@pytest.mark.parametrize("bad", ["speed", "e2e:p42", "cost:p90"])
def test_bad_objectives_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="--objective"):
        parse_objective(bad)


def test_a_sweep_with_slos_recommends_by_cost_at_the_slo(tmp_path: Path) -> None:
    # The synthetic world (conftest): structured prompts run 45 ms per token on the baseline, 45 / (3.0 - 0.05
    # |k - 7|) ms with the 1.7B draft and 45 / (1.1 - ...) ms with the 0.6B one: only the 1.7B cells meet 20 ms.
    cfg = build_config({"runtime": "sim", "bench": {"requests": 12, "max_tokens": 21, "concurrency": [4],
                        "prompts": "all", "slo": ["structured/p90:tpot<=20ms"]}}, environ={})  # fmt: skip
    sw = Sweep(cfg, "obj", tmp_path, SweepOptions(drafts=["qwen3-0.6b", "qwen3-1.7b"], windows=[5, 7], quiet=True))
    analysis = sw.run(lambda: FakeRunner()).analysis
    obj = analysis.objective
    assert obj is not None and obj.name == "cost" and obj.chosen_by == "default: SLOs are set"
    # the oracle: each cell's own summary, the SLO verdict and $/M read from it
    eligible = {}
    for cell in analysis.cells:
        s = Summary.model_validate(json.loads((sw.sweep_dir / cell.run_dir / "summary.json").read_text()))
        spec = s.levels[0].variants["speculative"]
        assert spec.goodput is not None and spec.cost is not None
        if spec.goodput.all_met:
            eligible[cell.key] = spec.cost.usd_per_million_output_tokens
    assert eligible and all(k.startswith("qwen3-1.7b") for k in eligible)
    (rec,) = obj.recommendations
    best = min(eligible, key=lambda k: eligible[k] or 0.0)
    assert rec.chosen is not None
    assert f"{rec.chosen.draft}-k{rec.chosen.window}@c4" == best or "ties with the best" in rec.text
    assert {f"{m.draft}-k{m.window}" for m in rec.ineligible} == {"qwen3-0.6b-k5", "qwen3-0.6b-k7"}
    write_report(sw.sweep_dir, analysis)
    md = (sw.sweep_dir / "sweep.md").read_text()
    assert "## Decision by $/M output tokens at the SLO (objective cost, default: SLOs are set)" in md
    assert "not eligible, missing the SLOs: qwen3-0.6b k5, qwen3-0.6b k7" in md
    console = Console(record=True, width=250)
    print_sweep_analysis(analysis, console)
    assert "Decision by $/M output tokens at the SLO" in console.export_text()
