"""The whole datum list of a tiny hand-made run, worked out by hand: every field of every TTFT, Errors and
acceptance datum (dimension order, minute-bucket timestamps, values, counts, unit, resolution), the
``--retime`` shift, the caller's run id and resolution, and a distribution split over two datums."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doubles.runfactory import make_run
from spectrn.errors import ConfigError
from spectrn.publish import datums
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord

T0 = 1_790_000_000.0  # 20 s into its minute: 1_790_000_000 = 29_833_333 * 60 + 20
B0 = 1_789_999_980  # the minute of T0 (floor, never the next minute)
T1 = T0 + 50  # 1_790_000_050: 10 s into the next minute
B1 = 1_790_000_040
CONFIG = "qwen3-1.7b/k7"  # the default config's label


def _rec(variant: str, index: int, sent: float, ttft: float, times: list[float], **kw: Any) -> RequestRecord:
    return RequestRecord(variant=variant, index=index, prompt_id=f"open-{index}", prompt_class="open", level="c4",
                         sent_at=sent, ttft=ttft, e2e=times[-1], chunk_times=times, chunk_tokens=[1] * len(times),
                         completion_tokens=len(times), prompt_tokens=10, status=200, **kw)  # fmt: skip


def _tiny_run(root: Path) -> RunFolder:
    """Baseline: two requests (minutes B0 and B1); speculative: one request (B0) and one failure (B1)."""
    records = [
        _rec("baseline", 0, T0, 0.5, [0.5, 1.0, 1.5]),
        _rec("speculative", 0, T0, 0.25, [0.25, 0.75]),
        _rec("baseline", 1, T1, 0.5, [0.5, 1.0, 2.0]),  # ends at T1 + 2 = 1_790_000_052: the run's end
        RequestRecord(
            variant="speculative",
            index=1,
            prompt_id="open-1",
            prompt_class="open",
            level="c4",
            sent_at=T1,
            status=500,
            error="http_500",
            error_msg="boom",
        ),  # fmt: skip
    ]
    return RunFolder.open(make_run(root, "r-audit", records))


def _dims(run_id: str, variant: str, pclass: str | None = None) -> list[dict[str, str]]:
    pairs = [("RunId", run_id), ("Config", CONFIG), ("Load", "c4"), ("Variant", variant)]
    pairs += [("PromptClass", pclass)] if pclass else []
    return [{"Name": n, "Value": v} for n, v in pairs]


def _datum(name: str, unit: str, dims: list[dict[str, str]], ts: float, values: list[float], counts: list[float],
           resolution: int = 60) -> dict[str, Any]:  # fmt: skip
    return {"MetricName": name, "Dimensions": dims, "Timestamp": datetime.fromtimestamp(ts, tz=UTC),
            "Values": values, "Counts": counts, "Unit": unit, "StorageResolution": resolution}  # fmt: skip


def _of(plan: datums.DatumPlan, name: str) -> list[dict[str, Any]]:
    return [d for d in plan.datums if d["MetricName"] == name]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    return _tiny_run(tmp_path_factory.mktemp("audit"))


def test_ttft_datums_are_bucketed_by_the_minute_each_request_was_sent(run: RunFolder) -> None:
    plan = datums.build_metric_datums(run)
    # order: by dimensions (the aggregate set, a prefix, before the per-class set), then by minute
    assert _of(plan, "TTFT") == [
        _datum("TTFT", "Seconds", _dims("r-audit", "baseline"), B0, [0.5], [1.0]),
        _datum("TTFT", "Seconds", _dims("r-audit", "baseline"), B1, [0.5], [1.0]),
        _datum("TTFT", "Seconds", _dims("r-audit", "baseline", "open"), B0, [0.5], [1.0]),
        _datum("TTFT", "Seconds", _dims("r-audit", "baseline", "open"), B1, [0.5], [1.0]),
        _datum("TTFT", "Seconds", _dims("r-audit", "speculative"), B0, [0.25], [1.0]),
        _datum("TTFT", "Seconds", _dims("r-audit", "speculative", "open"), B0, [0.25], [1.0]),
    ]


def test_errors_are_zero_per_success_and_one_per_failure_in_the_minute_sent(run: RunFolder) -> None:
    plan = datums.build_metric_datums(run)
    agg = [d for d in _of(plan, "Errors") if len(d["Dimensions"]) == 4]
    assert agg == [
        _datum("Errors", "Count", _dims("r-audit", "baseline"), B0, [0.0], [1.0]),
        _datum("Errors", "Count", _dims("r-audit", "baseline"), B1, [0.0], [1.0]),
        _datum("Errors", "Count", _dims("r-audit", "speculative"), B0, [0.0], [1.0]),
        _datum("Errors", "Count", _dims("r-audit", "speculative"), B1, [1.0], [1.0]),
    ]


def test_acceptance_is_stamped_at_the_minute_the_run_ended(run: RunFolder) -> None:
    plan = datums.build_metric_datums(run)
    # the run ends at T1 + 2 s = 1_790_000_052, in minute B1 (its start T0 is in B0); acceptance.json: rate 0.62
    assert _of(plan, "AcceptanceRate") == [
        _datum("AcceptanceRate", "Percent", _dims("r-audit", "speculative"), B1, [62.0], [1.0])
    ]
    assert _of(plan, "MeanAcceptanceLength") == [
        _datum("MeanAcceptanceLength", "None", _dims("r-audit", "speculative"), B1, [3.4], [1.0])
    ]


def test_retime_shifts_every_timestamp_and_the_plans_range_forward(run: RunFolder) -> None:
    shift = 3 * 86400.0
    plan = datums.build_metric_datums(run, time_shift_s=shift)
    stamps = sorted({d["Timestamp"].timestamp() for d in plan.datums})
    assert stamps == [B0 + shift, B1 + shift]
    assert (plan.start, plan.end, plan.time_shift_s) == (T0 + shift, T1 + 2.0 + shift, shift)


def test_the_callers_run_id_and_resolution_are_on_every_datum(run: RunFolder) -> None:
    plan = datums.build_metric_datums(run, run_id="sweep 7", storage_resolution=1)
    assert plan.run_id == "sweep 7"
    assert {d["Dimensions"][0]["Value"] for d in plan.datums} == {"sweep 7"}
    assert {d["StorageResolution"] for d in plan.datums} == {1}
    assert _of(plan, "TTFT")[0] == _datum("TTFT", "Seconds", _dims("sweep 7", "baseline"), B0, [0.5], [1.0], 1)


def test_a_distribution_of_200_distinct_values_is_split_150_then_50(tmp_path: Path) -> None:
    # one request, 201 one-token events: gap k = 0.01 + k * 1e-5 s (k = 0..199), 200 distinct 4-digit values
    gaps = [0.01 + k * 1e-5 for k in range(200)]
    times = [0.1]
    for g in gaps:
        times.append(times[-1] + g)
    rec = _rec("baseline", 0, T0, 0.1, times)
    plan = datums.build_metric_datums(RunFolder.open(make_run(tmp_path, "r-itl", [rec], acceptance={})))
    itl = [d for d in _of(plan, "ITL") if len(d["Dimensions"]) == 4]
    expect = [float(f"0.01{k:03d}") for k in range(200)]  # 0.01000, 0.01001, ... 0.01199: exact decimals
    assert [d["Values"] for d in itl] == [expect[:150], expect[150:]]
    assert [d["Counts"] for d in itl] == [[1.0] * 150, [1.0] * 50]
    assert plan.samples == sum(sum(d["Counts"]) for d in plan.datums)


def test_a_one_token_response_has_no_tpot_sample(tmp_path: Path) -> None:
    recs = [_rec("baseline", 0, T0, 0.5, [0.5]), _rec("baseline", 1, T0 + 1, 0.5, [0.5, 1.5])]
    plan = datums.build_metric_datums(RunFolder.open(make_run(tmp_path, "r-one", recs, acceptance={})))
    tpot = [d for d in _of(plan, "TPOT") if len(d["Dimensions"]) == 4]
    assert tpot == [_datum("TPOT", "Seconds", _dims("r-one", "baseline"), B0, [1.0], [1.0])]  # (1.5 - 0.5) / 1


def test_the_finest_settings_allowed_are_one_second_buckets_and_six_digits(run: RunFolder) -> None:
    plan = datums.build_metric_datums(run, bucket_s=1, sig_digits=6)
    stamps = sorted({d["Timestamp"].timestamp() for d in _of(plan, "TTFT")})
    assert stamps == [T0, T1]  # each request's own second
    with pytest.raises(ConfigError, match="sig_digits=7 must be within 1..6"):
        datums.build_metric_datums(run, sig_digits=7)
    with pytest.raises(ConfigError, match="bucket_s=0 must be at least 1 second"):
        datums.build_metric_datums(run, bucket_s=0)


def test_skipping_non_finite_gaps_keeps_the_finite_gaps_of_that_request(run: RunFolder) -> None:
    from dataclasses import replace

    from spectrn.analyze.metrics import RequestMetrics

    base = datums.default_metrics_fn(1.0)

    def one_nan_gap(rec: RequestRecord) -> RequestMetrics | None:
        m = base(rec)
        return None if m is None else replace(m, gaps=(0.25, math.nan), gap_tokens=(1, 1))

    plan = datums.build_metric_datums(run, skip_nonfinite=True, metrics_fn=one_nan_gap)
    itl = [
        (d["Dimensions"][3]["Value"], d["Values"], d["Counts"]) for d in _of(plan, "ITL") if len(d["Dimensions"]) == 4
    ]
    # each completed request keeps its finite gap: baseline two requests (minutes B0, B1), speculative one (B0)
    assert itl == [("baseline", [0.25], [1.0]), ("baseline", [0.25], [1.0]), ("speculative", [0.25], [1.0])]
    assert plan.nonfinite_dropped == [
        "ITL of baseline request 0 (open-0) has 1 non-finite gaps",
        "ITL of speculative request 0 (open-0) has 1 non-finite gaps",
        "ITL of baseline request 1 (open-1) has 1 non-finite gaps",
    ]
