"""The capacity search's scheduling, result and pricing on canned probes (no servers): which variants a probe
runs, the capacity and its cost per instance, the ratios and their ranges, where speculation stops paying,
and the notes a user reads. Every expected value is worked out by hand in the test."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spectrn.capacity import run as caprun
from spectrn.capacity.probe import Target
from spectrn.capacity.run import CapacityOptions, _next_probe, _price, _ratios, _stops_paying, _variant, run_capacity
from spectrn.capacity.search import Bracket
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError
from spectrn.run.capacity import Estimate, LoadComparison, Probe, ProbeVerdict, Ratio, VariantCapacity


def bracket(history: list[tuple[float, bool]], start: float = 1, maximum: float = 64) -> Bracket:
    b = Bracket("concurrency", start, maximum, 1)
    for load, ok in history:
        b.record(load, ok)
    return b


# ---- which probe runs next --------------------------------------------------------------------------------


def test_the_first_probe_runs_both_variants_at_the_start_load() -> None:
    got = _next_probe({"baseline": bracket([]), "speculative": bracket([])})
    assert got == (1, ["baseline", "speculative"], "doubling")


def test_a_bisecting_variant_probes_alone_at_the_lowest_wanted_load() -> None:
    # baseline failed at 4 after passing 2: bisects at (2 + 4) / 2 = 3; speculative still doubles towards 8
    brackets = {"baseline": bracket([(1, True), (2, True), (4, False)]),
                "speculative": bracket([(1, True), (2, True), (4, True)])}  # fmt: skip
    assert _next_probe(brackets) == (3, ["baseline"], "bisection")
    # a load one variant bisects at and another doubles to is a bisection probe, run by those two only
    brackets["speculative"] = bracket([(1, True), (2, True)], maximum=3)
    assert _next_probe(brackets) == (3, ["baseline", "speculative"], "bisection")


def test_a_finished_variant_joins_doubling_probes_up_to_four_times_its_first_fail() -> None:
    done = [(1, True), (2, True), (4, False), (3, True)]  # baseline: capacity 3, first fail 4: finished
    at = {16: ["baseline", "speculative"], 32: ["speculative"]}  # 16 = 4 x 4 still joins, 32 does not
    for load, ran in at.items():
        spec = [(float(x), True) for x in (1, 2, 4, 8, 16, 32) if x < load]
        brackets = {"baseline": bracket(done), "speculative": bracket(spec)}
        assert _next_probe(brackets) == (load, ran, "doubling"), load
    # a load the finished variant already ran is not run again
    brackets = {"baseline": bracket(done), "speculative": bracket([(1, True), (2, True)])}
    assert _next_probe(brackets) == (4, ["speculative"], "doubling")


def test_no_probe_once_every_bracket_is_within_its_precision() -> None:
    done = bracket([(1, True), (2, True), (4, False), (3, True)])
    assert _next_probe({"baseline": done, "speculative": bracket([(1, False)])}) is None


# ---- a variant's capacity and its cost ----------------------------------------------------------------------


def verdict(passed: bool, tok_s: float = 0.0, usd: float | None = None) -> ProbeVerdict:
    return ProbeVerdict(
        passed=passed,
        output_tokens_per_s=Estimate(value=tok_s, ci95=(0.9 * tok_s, 1.1 * tok_s)),
        usd_per_million_output_tokens=Estimate(value=usd, ci95=(usd - 1, usd + 1) if usd else None),
        tpot_p50_s=tok_s / 10_000,
        ttft_p50_s=tok_s / 1_000,
    )


def test_a_variants_capacity_reads_its_highest_passing_probe_per_instance() -> None:
    probes = [
        Probe(load=2, phase="doubling", run_dir="p01", verdicts={"baseline": verdict(True, 50.0, 30.0)}),
        Probe(load=4, phase="doubling", run_dir="p02", verdicts={"baseline": verdict(True, 80.0, 20.0)}),
        Probe(load=8, phase="doubling", run_dir="p03", verdicts={"baseline": verdict(False, 90.0, 18.0)}),
        Probe(load=6, phase="bisection", run_dir="p04", verdicts={"baseline": verdict(False, 85.0, 19.0)}),
        Probe(load=5, phase="bisection", run_dir="p05", verdicts={"speculative": verdict(True, 99.0, 9.0)}),
        Probe(load=5, phase="bisection", run_dir="p06", verdicts={"baseline": verdict(False, 82.0, 19.5)}),
    ]
    b = bracket([(2, True), (4, True), (8, False), (6, False), (5, False)])
    got = _variant("baseline", b, probes, share=0.5)
    # capacity 4 (probe p02): a service on half an instance, so one instance carries 4 / 0.5 = 8 streams and
    # 80 / 0.5 = 160 tok/s (interval 72 / 0.5, 88 / 0.5); $/M is the summary's own, unchanged
    assert got == VariantCapacity(
        capacity=4, capacity_per_instance=8.0, first_fail=5, reached_max=False, monotone=True, probe="p02",
        output_tokens_per_s_per_instance=Estimate(value=160.0, ci95=(144.0, 176.0)),
        usd_per_million_output_tokens=Estimate(value=20.0, ci95=(19.0, 21.0)),
        tpot_p50_s=0.008, ttft_p50_s=0.08, probes=5,
    )  # fmt: skip


def test_a_variant_that_fails_at_the_start_has_no_capacity_and_no_cost() -> None:
    probes = [Probe(load=1, phase="doubling", run_dir="p01", verdicts={"baseline": verdict(False, 10.0, 90.0)})]
    got = _variant("baseline", bracket([(1, False)]), probes, share=0.5)
    assert got == VariantCapacity(
        capacity=None, capacity_per_instance=None, first_fail=1, reached_max=False, monotone=True, probe=None,
        output_tokens_per_s_per_instance=Estimate(), usd_per_million_output_tokens=Estimate(),
        tpot_p50_s=None, ttft_p50_s=None, probes=1,
    )  # fmt: skip


def test_the_price_is_the_configs_override_or_the_built_in_one() -> None:
    cfg = build_config({}, {"pricing.instance_hourly_usd": 10.0, "pricing.instances_per_service": 0.25}, {})
    got = _price(cfg)
    assert got.model_dump() == {
        "instance_type": "trn2.48xlarge",
        "instance_hourly_usd": 10.0,
        "instances_per_service": 0.25,
        "source": "$10.00/h (pricing.instance_hourly_usd, set in the run's config)",
    }
    small = _price(
        build_config(
            {}, {"instance_type": "trn2.3xlarge", "resources.neuron_devices": 1, "tensor_parallel_size": 4}, {}
        )
    )
    assert (small.instance_type, small.instance_hourly_usd, small.instances_per_service) == ("trn2.3xlarge", 2.24, 0.5)
    assert small.source.startswith("$2.24/h (built-in on-demand list price, us-east-2")


# ---- speculative / baseline ratios ---------------------------------------------------------------------------


def cap(capacity: float, tok_s: float, probe: str | None) -> VariantCapacity:
    return VariantCapacity(
        capacity=capacity, capacity_per_instance=capacity * 2, first_fail=capacity + 1, reached_max=False,
        monotone=True, probe=probe, output_tokens_per_s_per_instance=Estimate(value=tok_s), probes=3,
    )  # fmt: skip


def test_ratios_are_speculative_over_baseline_with_the_brackets_as_the_capacity_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, Any, bool]] = []

    def requests_of(run: Any, variant: str) -> tuple[str, Any]:
        return (variant, run)

    def ratio_ci(num: Any, den: Any, *, paired: bool, seed: int) -> tuple[float, float]:
        calls.append((num, den, paired))
        return (1.2, 1.875)

    monkeypatch.setattr(caprun, "_requests_of", requests_of)
    monkeypatch.setattr("spectrn.analyze.throughput.ratio_ci", ratio_ci)
    caps = {"baseline": cap(4, 100.0, "pb"), "speculative": cap(8, 150.0, "ps")}
    brackets = {"baseline": bracket([(4, True), (5, False)]), "speculative": bracket([(8, True), (9, False)])}
    runs: dict[str, Any] = {"pb": "run-b", "ps": "run-s"}
    c, thr, cost = _ratios(caps, brackets, runs, seed=0)
    # capacity 8 / 4 = 2; its range: the lowest it can be, 8 / 5 (baseline's first fail), the highest 9 / 4
    assert (c.value, c.ci95) == (2.0, (1.6, 2.25))
    assert c.method.startswith("speculative capacity / baseline capacity")
    # throughput 150 / 100; cost 100 / 150 with the interval's bounds inverted and swapped: 1 / 1.875, 1 / 1.2
    assert calls == [(("speculative", "run-s"), ("baseline", "run-b"), False)]
    assert (thr.value, thr.ci95) == (1.5, (1.2, 1.875))
    assert cost.value == pytest.approx(100 / 150)
    assert cost.ci95 == pytest.approx((1 / 1.875, 1 / 1.2))
    assert cost.method.startswith("1 / the throughput ratio")


def test_ratios_without_a_failure_or_a_capacity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caprun, "_requests_of", lambda run, variant: None)
    caps = {"baseline": cap(4, 100.0, "pb"), "speculative": cap(8, 150.0, "ps")}
    brackets = {"baseline": bracket([(4, True), (5, False)]), "speculative": bracket([(8, True)], maximum=8)}
    c, thr, cost = _ratios(caps, brackets, {"pb": None, "ps": None}, seed=0)
    assert (c.value, c.ci95) == (2.0, None)  # speculative reached the maximum: no upper end to the range
    assert (thr.value, thr.ci95, cost.ci95) == (1.5, None, None)
    none = Ratio(method="needs both variants with a capacity")
    assert _ratios({"baseline": caps["baseline"]}, brackets, {}, seed=0) == (none, none, none)
    no_tok = {"baseline": cap(4, 100.0, None), "speculative": cap(8, 150.0, "ps")}
    _, thr2, cost2 = _ratios(no_tok, brackets, {}, seed=0)
    assert thr2 == cost2 == Ratio(method="no throughput at a capacity")


# ---- where speculation stops paying ------------------------------------------------------------------------


def _run_with(throughput_ratio: float, tpot_speedup: float) -> Any:
    ci = (throughput_ratio - 0.25, throughput_ratio + 0.25)
    sp = SimpleNamespace(
        aggregate_throughput=SimpleNamespace(value=throughput_ratio, ci95=ci),
        tpot_p50=SimpleNamespace(value=tpot_speedup, ci95=None),
    )
    return SimpleNamespace(summary=SimpleNamespace(levels=[SimpleNamespace(speedup=sp)]))


def _both(load: float, run_dir: str, usd_b: float, usd_s: float) -> Probe:
    verdicts = {"baseline": verdict(True, 10.0, usd_b), "speculative": verdict(True, 10.0, usd_s)}
    return Probe(load=load, phase="doubling", run_dir=run_dir, verdicts=verdicts)


def test_speculation_stops_paying_from_the_lowest_load_with_a_ratio_at_most_one() -> None:
    probes = [
        _both(4, "p3", 20.0, 25.0),
        _both(1, "p1", 30.0, 20.0),
        _both(2, "p2", 22.0, 22.0),
        Probe(load=8, phase="doubling", run_dir="p4", verdicts={"speculative": verdict(True, 10.0, 24.0)}),
    ]
    runs = {"p1": _run_with(1.5, 1.8), "p2": _run_with(1.0, 1.2), "p3": _run_with(0.75, 0.9)}
    got = _stops_paying(probes, runs)  # type: ignore[arg-type]
    # sorted by load; load 8 ran speculative only: not compared. A ratio of exactly 1 already does not pay.
    assert (got.cost_from, got.tpot_from) == (2, 4)
    assert got.compared == [
        LoadComparison(load=1, throughput_ratio=Estimate(value=1.5, ci95=(1.25, 1.75)), usd_per_million_baseline=30.0,
                       usd_per_million_speculative=20.0, tpot_speedup=Estimate(value=1.8)),
        LoadComparison(load=2, throughput_ratio=Estimate(value=1.0, ci95=(0.75, 1.25)), usd_per_million_baseline=22.0,
                       usd_per_million_speculative=22.0, tpot_speedup=Estimate(value=1.2)),
        LoadComparison(load=4, throughput_ratio=Estimate(value=0.75, ci95=(0.5, 1.0)), usd_per_million_baseline=20.0,
                       usd_per_million_speculative=25.0, tpot_speedup=Estimate(value=0.9)),
    ]  # fmt: skip
    assert got.note == (
        "speculative $/M is no lower than baseline's (aggregate throughput ratio <= 1, point estimate) from the "
        "lowest such probed load; TPOT: baseline / speculative TPOT p50 <= 1"
    )


def test_speculation_that_pays_everywhere_says_up_to_which_load() -> None:
    probes = [_both(1, "p1", 30.0, 20.0), _both(2, "p2", 25.0, 20.0)]
    got = _stops_paying(probes, {"p1": _run_with(1.5, 1.8), "p2": _run_with(1.25, 1.1)})  # type: ignore[arg-type]
    assert (got.cost_from, got.tpot_from) == (None, None)
    assert got.note.endswith("; speculation still pays at every load probed with both variants (up to 2)")
    alone = _stops_paying([Probe(load=1, phase="doubling", run_dir="p", verdicts={"baseline": verdict(True, 1.0)})],
                          {})  # fmt: skip
    assert (alone.cost_from, alone.compared, alone.note) == (None, [], "no load probed with both variants")


# ---- the whole result ------------------------------------------------------------------------------------


def _target(variants: tuple[str, ...]) -> Target:
    return Target(endpoints={v: f"http://{v}" for v in variants}, model=None, provenance=lambda c, e: None,  # type: ignore[arg-type,return-value]
                  runtime="endpoints")  # fmt: skip


def test_the_result_notes_a_start_that_fails_a_maximum_that_passes_and_a_non_monotone_search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    brackets = {"baseline": bracket([(1, False), (2, True)], maximum=4),
                "speculative": bracket([(1, True), (2, True), (4, True)], maximum=4)}  # fmt: skip
    probes = [
        Probe(load=1, phase="doubling", run_dir="a", verdicts={"baseline": verdict(False, 5.0, 50.0)}),
        Probe(load=2, phase="doubling", run_dir="b", verdicts={"baseline": verdict(True, 9.0, 40.0)}),
        Probe(load=4, phase="doubling", run_dir="c", verdicts={"speculative": verdict(True, 40.0, 10.0)}),
    ]
    monkeypatch.setattr(caprun, "search", lambda *a, **k: (probes, brackets, {}))
    cfg = build_config({}, {"pricing.instance_hourly_usd": 10.0, "pricing.instances_per_service": 0.5}, {})
    opts = CapacityOptions(kind="concurrency", start=1, maximum=4, precision=1, requests=30, percentiles=(50.0,),
                           slos=("p50:tpot<=40ms",))  # fmt: skip
    got = run_capacity(cfg, _target(("baseline", "speculative")), opts, tmp_path / "cap", "cap", window=5)
    assert got.notes == [
        "baseline: the start load 1 already misses the SLOs (capacity below it)",
        "baseline: a pass above a failing load: latency is not monotone in load here (noise near the threshold); "
        "the capacity is the highest pass below the lowest fail",
        "speculative: the maximum 4 still meets the SLOs (capacity at least that: raise --max)",
    ]
    # p50 needs ceil(10 / 0.5) = 20 requests, --requests 30 is larger; two per stream at the start is 2
    assert got.requests_per_probe == 30
    assert got.requests_rule.endswith("--requests if larger, and at least 2 x the concurrency")
    assert (got.load_kind, got.slos, got.start, got.maximum, got.precision) == ("concurrency", ["p50:tpot<=40ms"],
                                                                                1, 4, 1)  # fmt: skip
    assert (got.precision_rule, got.runtime, got.speculative_window) == ("adjacent concurrencies", "endpoints", 5)
    spec = got.variants["speculative"]
    # 40 tok/s per service on half an instance: 80 per instance; capacity 4 is 8 streams per instance
    assert (spec.capacity, spec.capacity_per_instance, spec.reached_max, spec.probe) == (4, 8.0, True, "c")
    assert spec.output_tokens_per_s_per_instance.value == 80.0
    assert got.variants["baseline"].capacity is None and not got.variants["baseline"].monotone
    assert got.capacity_ratio == Ratio(method="needs both variants with a capacity")
    assert json.loads((tmp_path / "cap" / "capacity.json").read_text()) == json.loads(got.model_dump_json())


def test_a_search_without_a_baseline_or_speculative_endpoint_is_refused(tmp_path: Path) -> None:
    opts = CapacityOptions(kind="rate", start=1, maximum=4, precision=0.1, requests=None, percentiles=(90.0,),
                           slos=("p90:tpot<=40ms",))  # fmt: skip
    with pytest.raises(ConfigError, match="no baseline or speculative endpoint"):
        run_capacity(build_config({}, None, {}), _target(("draft",)), opts, tmp_path / "x", "x")
    assert not (tmp_path / "x").exists()
