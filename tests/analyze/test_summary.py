"""Every statistic on hand-computed data (the expected values are worked out here, never by the code under test)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from doubles.oracle import weighted_median
from spectrn.analyze.headline import mix_speedup
from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.run import analyze_folder
from spectrn.analyze.stats import bootstrap, describe, stats_with_ci
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance, Speedup, Summary


def rec(
    variant: str = "baseline",
    index: int = 0,
    times=(0.1, 0.2, 0.25, 0.45),
    toks=(1, 3, 1, 5),
    e2e: float = 0.5,
    cls: str = "structured",
    error: str | None = None,
    ids=None,
    level: str = "c4",
    sent_at: float = 1000.0,
) -> RequestRecord:
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index}",
        prompt_class=cls,
        level=level,
        sent_at=sent_at,
        ttft=None if error else times[0],
        e2e=None if error else e2e,
        chunk_times=list(times) if not error else [],
        chunk_tokens=list(toks) if not error else [],
        completion_tokens=None if error else sum(toks),
        status=500 if error else 200,
        error=error,
        output_token_ids=ids,
    )


def meta(**kw) -> RunMeta:
    cfg = kw.pop("config", None) or SpectrnConfig()
    return RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=cfg, **kw)


def test_request_metrics_by_hand() -> None:
    m = request_metrics(rec())
    assert m is not None
    assert m.output_tokens == 10
    assert m.ttft == 0.1 and m.e2e == 0.5
    assert m.tpot == pytest.approx(0.4 / 9)  # (e2e - ttft) / (n - 1), not / n
    assert m.itls == pytest.approx([0.1 / 3] * 3 + [0.05] + [0.2 / 5] * 5)
    assert m.chunk_latencies == pytest.approx([0.1, 0.05, 0.2])
    assert m.llmperf_itl == pytest.approx(0.45 / 4)
    assert m.tokens_per_decode_chunk == pytest.approx(3.0)
    assert m.throughput_tok_s == pytest.approx(20.0)


def test_request_metrics_rescale_simulated_time() -> None:
    m = request_metrics(rec(), time_scale=0.25)  # a run at 4x speed: real durations are 4x longer
    assert m is not None
    assert m.ttft == pytest.approx(0.4) and m.e2e == pytest.approx(2.0)
    assert m.tpot == pytest.approx(1.6 / 9)
    assert m.throughput_tok_s == pytest.approx(5.0)


def test_single_token_request_has_no_tpot() -> None:
    m = request_metrics(rec(times=(0.1,), toks=(1,), e2e=0.1))
    assert m is not None and m.tpot is None and m.itls == []


def test_failed_request_has_no_metrics() -> None:
    assert request_metrics(rec(error="http_500")) is None


def test_describe_matches_linear_percentiles() -> None:
    d = describe([float(x) for x in range(1, 101)])
    assert d.n == 100 and d.mean == 50.5
    # linear interpolation between order statistics: p90 = 90 + 0.1 * (91 - 90)
    assert d.p50 == pytest.approx(50.5) and d.p90 == pytest.approx(90.1) and d.p99 == pytest.approx(99.01)
    assert d.min == 1 and d.max == 100
    assert describe([]).p50 is None


def test_weighted_median_equals_the_median_of_the_expanded_values() -> None:
    assert weighted_median([1.0, 2.0, 3.0], [1, 1, 2]) == 2.5  # 1 2 3 3
    assert weighted_median([5.0, 1.0], [3, 1]) == 5.0  # 1 5 5 5
    assert weighted_median([2.0], [4]) == 2.0
    assert math.isnan(weighted_median([], []))


def test_bootstrap_ci_covers_the_mean_and_is_reproducible() -> None:
    import numpy as np

    x = np.random.default_rng(1).normal(10.0, 2.0, 400)
    ci = bootstrap(lambda i: float(x[i].mean()), x.size, seed=5)
    assert ci is not None and ci[0] < 10.0 < ci[1]
    assert ci[1] - ci[0] == pytest.approx(2 * 1.96 * 2.0 / 20, rel=0.25)  # ~ 2 * 1.96 * sigma / sqrt(n)
    assert bootstrap(lambda i: float(x[i].mean()), x.size, seed=5) == ci
    assert bootstrap(lambda i: 0.0, 1) is None
    s = stats_with_ci(list(x))
    assert s.ci95 is not None and s.ci95.p50 is not None
    assert s.ci95.p50[0] < (s.p50 or 0) < s.ci95.p50[1]


def _paired_records(n: int = 40) -> list[RequestRecord]:
    out = []
    for i in range(n):
        jitter = 1 + 0.01 * (i % 5)
        out.append(rec("baseline", i, times=(0.1, 0.1 + 0.36 * jitter), toks=(1, 9), e2e=0.1 + 0.36 * jitter))
        out.append(rec("speculative", i, times=(0.1, 0.1 + 0.18 * jitter), toks=(1, 9), e2e=0.1 + 0.18 * jitter))
    return out


def test_speedups_are_paired_by_index() -> None:
    s = summarize(_paired_records(), meta())
    sp = s.levels[0].speedup
    assert sp is not None and sp.paired_requests == 40 and sp.paired
    assert sp.tpot_p50 is not None and sp.tpot_p50.value == pytest.approx(2.0, rel=1e-6)  # 0.36 / 0.18 per pair
    assert sp.tpot_p50.ci95 is not None
    lo, hi = sp.tpot_p50.ci95
    assert lo <= 2.0 <= hi and hi - lo < 0.05
    assert sp.ttft_p50 is not None and sp.ttft_p50.value == pytest.approx(1.0)
    assert sp.throughput is not None and (sp.throughput.value or 0) > 1.5
    assert sp.tpot_p50.verdict == "faster"


def test_equivalence_reports_first_divergence() -> None:
    recs = [
        rec("baseline", 0, ids=[1, 2, 3]),
        rec("speculative", 0, ids=[1, 2, 3]),
        rec("baseline", 1, ids=[1, 2, 3, 4]),
        rec("speculative", 1, ids=[1, 2, 9, 4]),
        rec("baseline", 2, ids=[5]),  # no partner: not compared
    ]
    s = summarize(recs, meta())
    eq = s.levels[0].equivalence
    assert eq is not None and eq.compared == 2 and eq.matched == 1 and eq.match_rate == 0.5
    assert [d.model_dump() for d in eq.divergences] == [
        {"level": "c4", "index": 1, "prompt_id": "p1", "first_divergence": 2}
    ]
    assert any(f.code == "divergence" for f in s.findings)


def test_summary_flags_error_rate_and_counts_classes() -> None:
    recs = (
        [rec("baseline", i, sent_at=1000 + i) for i in range(8)]
        + [rec("baseline", 8, error="http_500"), rec("baseline", 9, error="timeout")]
        + [rec("speculative", i, times=(0.1, 0.2), toks=(1, 9), e2e=0.2, sent_at=1000 + i) for i in range(10)]
    )
    s = summarize(recs, meta())
    b = s.levels[0].variants["baseline"]
    assert b.requests.model_dump() == {
        "planned": None,
        "completed": 8,
        "errors": 2,
        "error_rate": 0.2,
        "error_classes": {"http_500": 1, "timeout": 1},
        "error_examples": {"http_500": "", "timeout": ""},
    }
    assert s.clean is False and any("NOT A CLEAN RUN" in w for w in s.warnings())
    assert [f.code for f in s.findings if f.severity == "error"] == ["error_rate"]
    assert set(s.levels[0].by_prompt_class) == {"structured"}
    assert s.levels[0].speedup is not None and s.levels[0].speedup.paired_requests == 8
    # aggregate throughput: 8 x 10 tokens between the first send (1000) and the last end (1007 + 0.5)
    assert b.output_tokens_per_s.aggregate == pytest.approx(80 / 7.5)
    # $44.70/h (trn2.48xlarge), half an instance: 22.35 $/h / (80/7.5 tok/s * 3600 s/h) per token
    assert b.cost is not None
    assert b.cost.usd_per_million_output_tokens == pytest.approx(22.35 / (80 / 7.5 * 3600) * 1e6)


def test_summary_counts_planned_requests_and_flags_a_run_that_stopped_part_way() -> None:
    recs = [rec(v, i, sent_at=1000 + i) for i in range(6) for v in ("baseline", "speculative")]
    s = summarize(recs, meta(planned={"baseline": {"c4": 10}, "speculative": {"c4": 10}}))
    assert s.levels[0].variants["baseline"].requests.planned == 10
    assert not s.clean and {f.code for f in s.findings} >= {"incomplete"}
    s2 = summarize(recs + recs[:2], meta(planned={"baseline": {"c4": 6}, "speculative": {"c4": 6}}))
    assert not s2.clean and "duplicates" in {f.code for f in s2.findings}
    s3 = summarize(recs, meta(planned={"baseline": {"c4": 6}, "speculative": {"c4": 6}}))
    assert s3.clean


def test_summary_splits_levels_and_classes_and_orders_levels_by_load() -> None:
    recs = []
    for level in ("c16", "c4", "c1"):
        for i in range(4):
            for v in ("baseline", "speculative"):
                recs.append(rec(v, i, cls="open" if i % 2 else "structured", level=level))
    s = summarize(recs, meta())
    assert s.level_labels == ["c1", "c4", "c16"]
    assert set(s.levels[0].by_prompt_class) == {"open", "structured"}
    assert s.clean is True
    # the headline is per prompt class (never pooled without a declared mix): 2 classes x 3 levels
    assert sorted({(h.level, h.scope) for h in s.headline}) == sorted(
        (lv, c) for lv in ("c1", "c4", "c16") for c in ("open", "structured")
    )


def test_time_scale_rescales_every_figure_and_says_so() -> None:
    recs = _paired_records(10)
    real = summarize(recs, meta())
    scaled = summarize(recs, meta(provenance=Provenance(runtime="sim", time_scale=0.25)))
    rb, sb = real.levels[0].variants["baseline"], scaled.levels[0].variants["baseline"]
    assert sb.tpot_s.p50 == pytest.approx((rb.tpot_s.p50 or 0) * 4)
    assert sb.itl_s.p50 == pytest.approx((rb.itl_s.p50 or 0) * 4, rel=0.011)  # sketch quantiles: 0.5% each
    assert sb.output_tokens_per_s.aggregate == pytest.approx((rb.output_tokens_per_s.aggregate or 0) / 4)
    assert rb.cost and sb.cost
    assert sb.cost.usd_per_million_output_tokens == pytest.approx((rb.cost.usd_per_million_output_tokens or 0) * 4)
    assert scaled.provenance.rescaled and scaled.provenance.time_scale == 0.25
    assert any(f.code == "time_scale" for f in scaled.findings)
    # ratios are unaffected
    assert scaled.levels[0].speedup and real.levels[0].speedup
    assert scaled.levels[0].speedup.tpot_p50 and real.levels[0].speedup.tpot_p50
    assert scaled.levels[0].speedup.tpot_p50.value == pytest.approx(real.levels[0].speedup.tpot_p50.value or 0)


def test_mix_speedup_weights_time_per_token() -> None:
    # structured: base 45 ms, 3x -> 15 ms; open: base 45 ms, 1x -> 45 ms. Mix 0.5/0.5: 45 / 30 = 1.5x
    sp = mix_speedup([(0.5, 0.045, Speedup(value=3.0)), (0.5, 0.045, Speedup(value=1.0))])
    assert sp is not None and sp.value == pytest.approx(1.5)
    # with intervals: a symmetric log-scale interval around the value
    sp2 = mix_speedup(
        [(0.7, 0.045, Speedup(value=3.0, ci95=(2.9, 3.1))), (0.3, 0.045, Speedup(value=1.0, ci95=(0.95, 1.05)))]
    )
    assert sp2 is not None and sp2.ci95 is not None
    assert sp2.value == pytest.approx(1 / (0.7 / 3 + 0.3))
    assert sp2.ci95[0] < (sp2.value or 0) < sp2.ci95[1]
    assert math.log(sp2.value or 1) - math.log(sp2.ci95[0]) == pytest.approx(
        math.log(sp2.ci95[1]) - math.log(sp2.value or 1)
    )


def test_declared_mix_adds_a_weighted_headline() -> None:
    recs = []
    for i in range(20):
        cls = "structured" if i % 2 else "open"
        fast = 0.09 if cls == "structured" else 0.27
        recs.append(rec("baseline", i, cls=cls, times=(0.1, 0.37), toks=(1, 9), e2e=0.37))
        recs.append(rec("speculative", i, cls=cls, times=(0.1, 0.1 + fast), toks=(1, 9), e2e=0.1 + fast))
    s = summarize(recs, meta(), mix={"structured": 0.5, "open": 0.5})
    mix = [h for h in s.headline if h.scope == "mix"]
    assert len(mix) == 1 and mix[0].speedup.value == pytest.approx(0.27 / ((0.09 + 0.27) / 2))


def test_analyze_folder_writes_a_summary_that_validates(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    run.mkdir()
    (run / "run.json").write_text(
        RunMeta(run_id="r1", spectrn_version="0", started_at=0, model="Qwen/Qwen3-32B", max_tokens=10).model_dump_json()
    )
    with (run / "requests.jsonl").open("w") as f:
        for i in range(5):
            for v in ("baseline", "speculative"):
                f.write(rec(v, i).model_dump_json() + "\n")
        f.write('{"variant": "baseline", "ind')  # torn last line of a killed writer
    counters = {"speculative@c4": {"rate": 0.5, "mean_accepted_length": 3.0, "drafts": 10, "accepted_tokens": 20}}
    (run / "acceptance.json").write_text(json.dumps(counters))
    _, s = analyze_folder(run)
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is not None and acc.source == "counters" and acc.rate == 0.5
    assert acc.stream is not None and acc.stream.steps > 0  # the stream is kept next to the counters
    on_disk = Summary.model_validate_json((run / "summary.json").read_text())
    assert on_disk == s and on_disk.schema_version == 2 and on_disk.run_id == "r1"


def test_clustered_intervals_match_a_direct_bootstrap_of_the_expanded_values() -> None:
    """The binned bootstrap (a matrix product) gives the interval a direct bootstrap of the weighted median
    gives, within the sketch's accuracy; and it covers the median of the generating distribution."""
    import numpy as np

    from spectrn.analyze.stats import SKETCH_ACCURACY, clustered_ci, rng

    gen = np.random.default_rng(3)
    groups = []
    for _ in range(300):  # requests: a per-request level (correlated tokens) plus per-event noise
        level = gen.lognormal(np.log(0.015), 0.3)
        k = gen.integers(1, 5, 40)
        groups.append((level * gen.lognormal(0, 0.1, 40) / k, k.astype(float)))
    ci = clustered_ci(groups, seed=1, resamples=400)
    assert ci.p50 is not None and ci.mean is not None
    direct = []
    r = rng(9)
    for _ in range(400):
        idx = r.integers(0, len(groups), len(groups))
        v = np.concatenate([groups[i][0] for i in idx])
        w = np.concatenate([groups[i][1] for i in idx])
        direct.append(weighted_median(v, w))
    lo, hi = np.percentile(direct, [2.5, 97.5])
    width = hi - lo
    assert ci.p50[0] == pytest.approx(lo, abs=0.25 * width + 2 * SKETCH_ACCURACY * lo)
    assert ci.p50[1] == pytest.approx(hi, abs=0.25 * width + 2 * SKETCH_ACCURACY * hi)
    all_v = np.concatenate([g[0] for g in groups])
    all_w = np.concatenate([g[1] for g in groups])
    assert ci.p50[0] <= weighted_median(all_v, all_w) <= ci.p50[1]


def test_per_class_throughput_and_cost_are_shares_of_the_level() -> None:
    """In a mixed run, a class's throughput is its tokens over the level's wall (the classes sum to the pool) and
    its cost is its share of that wall by the slot-seconds (first to last token) its requests held
    (docs/benchmarks.md, per-class throughput and cost)."""
    recs = []
    for i in range(8):
        cls = "structured" if i % 2 else "open"
        e2e = 0.5 if cls == "structured" else 2.0  # 10 tokens each, first token at 0.1 s
        recs.append(rec("baseline", i, cls=cls, times=(0.1, e2e), toks=(1, 9), e2e=e2e, sent_at=1000 + i))
        recs.append(rec("speculative", i, cls=cls, times=(0.1, e2e), toks=(1, 9), e2e=e2e, sent_at=1000 + i))
    s = summarize(recs, meta())
    wall = max(i + (0.5 if i % 2 else 2.0) for i in range(8))  # first send (i = 0) to last end (i = 6, open)
    slots = {"structured": 4 * (0.5 - 0.1), "open": 4 * (2.0 - 0.1)}
    pooled = s.levels[0].variants["baseline"]
    assert pooled.output_tokens_per_s.aggregate == pytest.approx(80 / wall)
    for cls in ("structured", "open"):
        vs = s.levels[0].by_prompt_class[cls].variants["baseline"]
        assert vs.output_tokens_per_s.aggregate == pytest.approx(40 / wall)
        billed = wall * slots[cls] / sum(slots.values())
        assert vs.cost is not None and vs.cost.billed_s == pytest.approx(billed)
        assert vs.cost.usd_per_million_output_tokens == pytest.approx(22.35 * billed / 3600 / 40 * 1e6)


def test_a_class_with_records_of_one_variant_only() -> None:
    """The alphabetically first class has only speculative records (e.g. its baseline requests never ran): the
    run is still summarised, the class without a pair has no speedup, the others keep theirs."""
    recs = [rec("speculative", 100, cls="aaa-only-speculative")]
    for i in range(4):
        recs += [rec("baseline", i, cls="open"), rec("speculative", i, cls="open")]
    s = summarize(recs, meta())
    assert set(s.levels[0].by_prompt_class) == {"aaa-only-speculative", "open"}
    assert s.levels[0].by_prompt_class["aaa-only-speculative"].speedup is None
    assert s.levels[0].by_prompt_class["open"].speedup is not None
    assert s.levels[0].variants["baseline"].requests.completed == 4


def test_a_variant_without_measurable_wall_time_has_no_throughput_or_cost() -> None:
    """Two requests sent at the same instant whose responses took no measurable time (e2e 0, which the record
    format allows): tokens over zero seconds have no rate, so the variant reports no aggregate throughput, no
    cost and a duration of 0, never tokens over an invented nanosecond."""
    recs = [rec("baseline", i, times=(0.0,), toks=(4,), e2e=0.0) for i in range(2)]
    b = summarize(recs, meta()).levels[0].variants["baseline"]
    assert b.requests.completed == 2 and b.output_tokens.mean == 4.0
    assert b.duration_s == 0.0
    assert b.output_tokens_per_s.aggregate is None and b.output_tokens_per_s.aggregate_ci95 is None
    assert b.cost is None
