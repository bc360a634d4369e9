"""Records -> PutMetricData datums and batches: values, limits, non-finite values, timestamps (pure, no server)."""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pytest

from doubles import oracle
from doubles.runfactory import make_run
from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.run import ensure_summary
from spectrn.errors import ConfigError, PublishError
from spectrn.publish import datums, limits
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord


def _dims(d: dict[str, Any]) -> dict[str, str]:
    return {x["Name"]: x["Value"] for x in d["Dimensions"]}


def _expand(datums: list[dict[str, Any]], name: str, **dims: str) -> list[float]:
    """Every sample of ``name`` whose dimension set is exactly ``dims`` (values repeated by their counts)."""
    out: list[float] = []
    for d in datums:
        if d["MetricName"] == name and _dims(d) == dims:
            for v, c in zip(d["Values"], d["Counts"], strict=True):
                out += [v] * int(c)
    return sorted(out)


def _rounded(values: list[float], sig: int = 4) -> list[float]:
    uniq, counts = datums.round_sig(values, sig)
    return [v for v, c in zip(uniq, counts, strict=True) for _ in range(int(c))]


def test_round_sig_collapses_repeats_and_gives_exact_decimals() -> None:
    values, counts = datums.round_sig([0.0153449, 0.0153451, 0.01534, 9.9996, 10.001, 0.0, -0.5, 1e-120], 4)
    assert values == [-0.5, 0.0, 0.01534, 0.01535, 10.0]
    assert counts == [1.0, 2.0, 2.0, 1.0, 2.0]  # 1e-120 is below CloudWatch's range: published as 0
    assert all(repr(v) == repr(float(f"{v:.4g}")) for v in values)


def test_datums_carry_each_requests_raw_values(tmp_path: Path) -> None:
    from spectrn.configuration.config import SpectrnConfig

    cfg = SpectrnConfig().model_dump(mode="json")
    cfg["bench"]["slo"] = ["tpot<=40ms"]  # every documented metric is published, goodput included
    run_dir = make_run(tmp_path, per_class=5, errors=2, config=cfg)
    run = RunFolder.open(run_dir)
    plan = datums.build_metric_datums(run, namespace="Spectrn")
    base = {"RunId": "run-1", "Config": "qwen3-1.7b/k7", "Load": "c4"}
    records = list(run.records())
    ok = [r for r in records if r.ok]
    assert all(not r.warmup for r in records)
    for variant in ("baseline", "speculative"):
        for cls in ("structured", "open"):
            recs = [r for r in ok if r.variant == variant and r.prompt_class == cls]
            got = _expand(plan.datums, "TTFT", **base, Variant=variant, PromptClass=cls)
            assert got == _rounded([r.ttft for r in recs])
            got = _expand(plan.datums, "TPOT", **base, Variant=variant, PromptClass=cls)
            assert got == _rounded([(r.e2e - r.ttft) / (24 - 1) for r in recs])  # 24 tokens per request
            itl = _expand(plan.datums, "ITL", **base, Variant=variant, PromptClass=cls)
            assert itl == _rounded([x for r in recs for x in oracle.itls(r)])
            assert len(itl) == (24 - 1) * len(recs)  # every per-token gap, not one per request or per event
            tpc = _expand(plan.datums, "TokensPerChunk", **base, Variant=variant, PromptClass=cls)
            assert tpc == _rounded([23 / (len(r.chunk_times) - 1) for r in recs])
        # the aggregate dimension set is the union over prompt classes
        agg = _expand(plan.datums, "E2ELatency", **base, Variant=variant)
        assert agg == _rounded([r.e2e for r in ok if r.variant == variant])
        errors = _expand(plan.datums, "Errors", **base, Variant=variant)
        all_v = [r for r in records if r.variant == variant]
        assert len(errors) == len(all_v) and sum(errors) == sum(1 for r in all_v if not r.ok)
    rate = _expand(plan.datums, "AcceptanceRate", **base, Variant="speculative")
    assert rate == [62.0]
    assert _expand(plan.datums, "MeanAcceptanceLength", **base, Variant="speculative") == [3.4]
    assert not _expand(plan.datums, "AcceptanceRate", **base, Variant="baseline")
    for variant in ("baseline", "speculative"):  # goodput from its definition: requests with TPOT <= 40 ms / wall
        mine = [r for r in records if r.variant == variant]
        done = [r for r in mine if r.ok]
        good = [r for r in done if (r.e2e - r.ttft) / (24 - 1) <= 0.040]
        wall = max(r.sent_at + r.e2e for r in done) - min(r.sent_at for r in done)
        assert _expand(plan.datums, "GoodputRequests", **base, Variant=variant) == _rounded([len(good) / wall])
        assert _expand(plan.datums, "GoodputTokens", **base, Variant=variant) == _rounded([24 * len(good) / wall])
        assert _expand(plan.datums, "GoodputShare", **base, Variant=variant) == _rounded([100 * len(good) / len(mine)])
        assert len(_expand(plan.datums, "GoodputRequests", **base, Variant=variant, PromptClass="open")) == 1
    assert _expand(plan.datums, "GoodputRequests", **base, Variant="speculative") != [0.0]  # not vacuous
    units = {d["MetricName"]: d["Unit"] for d in plan.datums}
    assert units == {name: spec.unit for name, spec in datums.METRICS.items()}
    assert {d["StorageResolution"] for d in plan.datums} == {60}
    assert plan.samples == sum(sum(d["Counts"]) for d in plan.datums)


def test_percentiles_from_published_distribution_match_the_records(tmp_path: Path) -> None:
    """moto cannot compute percentiles, so check here that the distribution sent lets CloudWatch compute the same
    percentiles as the raw records: rounding is monotonic, so nearest-rank percentiles agree exactly."""
    run = RunFolder.open(make_run(tmp_path, per_class=40, summary=False))
    plan = datums.build_metric_datums(run)
    base = {"RunId": "run-1", "Config": "qwen3-1.7b/k7", "Load": "c4"}
    records = list(run.records())
    for variant in ("baseline", "speculative"):
        raw_itl = [x for r in records if r.ok and r.variant == variant for x in oracle.itls(r)]
        raw_tpot = [oracle.tpot(r) for r in records if r.ok and r.variant == variant]
        for name, raw in (("ITL", raw_itl), ("TPOT", raw_tpot)):
            published = _expand(plan.datums, name, **base, Variant=variant)
            for q in (50, 90, 99):
                expect = float(np.percentile(raw, q, method="inverted_cdf"))
                got = float(np.percentile(published, q, method="inverted_cdf"))
                assert got == datums.round_sig([expect], 4)[0][0], (name, variant, q)  # rounding is monotonic
                assert math.isclose(got, expect, rel_tol=5e-4)


def _big_run(root: Path, n_requests: int, classes: int = 8, seed: int = 1) -> RunFolder:
    """A synthetic run folder of ``n_requests`` requests."""
    rng = random.Random(seed)
    start = time.time() - 6 * 3600
    records = []
    for i in range(n_requests):
        variant = "baseline" if i % 2 == 0 else "speculative"
        ttft = 0.03 + rng.random() * 0.05
        times, toks, t = [ttft], [1], ttft
        for _ in range(5):
            t += 0.01 + rng.random() * 0.04
            times.append(t)
            toks.append(1 if variant == "baseline" else rng.randint(1, 4))
        records.append(
            RequestRecord(
                variant=variant,
                index=i // 2,
                prompt_id=f"p{i}",
                prompt_class=f"class{(i // 2) % classes}",
                sent_at=start + i * 0.2,
                ttft=ttft,
                e2e=t,
                chunk_times=times,
                chunk_tokens=toks,
            )
        )
    return RunFolder.open(make_run(root, "big", records, acceptance={}))


def _botocore_sizes(batch: list[dict[str, Any]], namespace: str) -> tuple[int, int]:
    """The real request body sizes botocore would send for one batch: query protocol and CBOR."""
    import botocore.session
    from botocore.serialize import create_serializer

    op = botocore.session.get_session().get_service_model("cloudwatch").operation_model("PutMetricData")
    params = {"Namespace": namespace, "MetricData": batch}
    query = create_serializer("query").serialize_to_request(params, op)["body"]
    cbor = create_serializer("smithy-rpc-v2-cbor").serialize_to_request(params, op)["body"]
    return len(urlencode(query).encode()), len(cbor)


@pytest.mark.slow
def test_batching_limits_hold_for_100k_requests(tmp_path: Path) -> None:
    run = _big_run(tmp_path, 100_000)
    plan = datums.build_metric_datums(run, namespace="Spectrn")
    batches = datums.batch_datums(plan.datums, namespace="Spectrn")
    records = list(run.records())
    n_ok = len(records)
    # nothing lost, nothing duplicated: TTFT samples = requests x 2 dimension sets
    ttft = sum(sum(d["Counts"]) for d in plan.datums if d["MetricName"] == "TTFT")
    assert ttft == 2 * n_ok
    itl = sum(sum(d["Counts"]) for d in plan.datums if d["MetricName"] == "ITL")
    assert itl == 2 * sum(sum(r.chunk_tokens[1:]) for r in records)  # one sample per token after the first
    assert [d for b in batches for d in b] == plan.datums  # order kept, every datum in exactly one call
    assert max(len(d["Values"]) for d in plan.datums) == limits.MAX_VALUES_PER_DATUM  # splitting happened
    for d in plan.datums:
        limits.validate_datum(d)
        assert len(d["Values"]) <= 150 and len(d["Values"]) == len(d["Counts"]) == len(set(d["Values"]))
        assert len(d["Dimensions"]) <= 30
        assert all(math.isfinite(v) for v in d["Values"])
    assert all(len(b) <= 1000 for b in batches)
    assert any(len(b) < 1000 for b in batches[:-1])  # some calls were cut by size, not by count
    largest = sorted(batches, key=lambda b: sum(limits.estimate_request_bytes(d) for d in b))[-5:]
    for b in largest:
        query_bytes, cbor_bytes = _botocore_sizes(b, "Spectrn")
        assert query_bytes <= limits.MAX_REQUEST_BYTES and cbor_bytes <= limits.MAX_REQUEST_BYTES
        assert query_bytes <= sum(limits.estimate_request_bytes(d) for d in b) + 200  # the estimate is an upper bound


def test_batches_respect_the_1000_datum_limit() -> None:
    ts = datetime.now(tz=UTC)
    many = [
        {
            "MetricName": "TTFT",
            "Dimensions": [{"Name": "RunId", "Value": f"r{i}"}],
            "Timestamp": ts,
            "Values": [0.1],
            "Counts": [1.0],
            "Unit": "Seconds",
            "StorageResolution": 60,
        }
        for i in range(2500)
    ]
    batches = datums.batch_datums(many)
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [len(b) for b in datums.batch_datums(many, max_datums=300)][:2] == [300, 300]


def test_validate_datum_rejects_what_cloudwatch_rejects() -> None:
    ok = {
        "MetricName": "TTFT",
        "Dimensions": [{"Name": "RunId", "Value": "r"}],
        "Timestamp": datetime.now(tz=UTC),
        "Values": [0.1],
        "Counts": [1.0],
        "Unit": "Seconds",
        "StorageResolution": 60,
    }
    limits.validate_datum(ok)
    for bad, why in (
        ({"Values": [float(i) for i in range(151)], "Counts": [1.0] * 151}, "151 values"),
        ({"Values": [float("nan")]}, "outside CloudWatch's range"),
        ({"Values": [float("inf")]}, "outside CloudWatch's range"),
        ({"Counts": [1.0, 2.0]}, "2 counts for 1 values"),
        ({"Dimensions": [{"Name": f"D{i}", "Value": "v"} for i in range(31)]}, "31 dimensions"),
        ({"Dimensions": [{"Name": "RunId", "Value": ""}]}, "empty dimension"),
        ({"Unit": "Parsecs"}, "unit"),
        ({"StorageResolution": 5}, "StorageResolution"),
    ):
        with pytest.raises(PublishError, match=why):
            limits.validate_datum({**ok, **bad})


def _nan_metrics(rec: RequestRecord) -> Any:
    """requests.jsonl cannot hold NaN (pydantic writes null), but a metrics function can produce one."""
    from dataclasses import replace

    m = request_metrics(rec)
    if m is not None and rec.index == 0 and rec.variant == "baseline":
        return replace(m, ttft=float("nan"))
    if m is not None and rec.index == 1 and rec.variant == "speculative":
        return replace(m, e2e=float("inf"))
    return m


def _nan_run(tmp_path: Path) -> RunFolder:
    return RunFolder.open(make_run(tmp_path, per_class=3, errors=0, summary=False))


def test_nonfinite_values_fail_with_the_requests_named(tmp_path: Path) -> None:
    run = _nan_run(tmp_path)
    with pytest.raises(PublishError) as e:
        datums.build_metric_datums(run, metrics_fn=_nan_metrics)
    msg = str(e.value)
    assert "non-finite" in msg and "baseline request 0 (structured-0)" in msg and "nan" in msg
    assert "--skip-nonfinite" in msg


def test_skip_nonfinite_drops_and_lists_them(tmp_path: Path) -> None:
    run = _nan_run(tmp_path)
    plan = datums.build_metric_datums(run, skip_nonfinite=True, metrics_fn=_nan_metrics)
    assert plan.nonfinite_dropped and any("TTFT of baseline request 0" in x for x in plan.nonfinite_dropped)
    for d in plan.datums:
        limits.validate_datum(d)
    for b in datums.batch_datums(plan.datums):
        assert b


def test_nonfinite_acceptance_never_reaches_cloudwatch(tmp_path: Path) -> None:
    run_dir = make_run(
        tmp_path,
        per_class=2,
        summary=False,
        acceptance={"speculative": {"rate": float("nan"), "mean_accepted_length": 2}},
    )
    plan = datums.build_metric_datums(RunFolder.open(run_dir))  # a NaN counter is "not reported" at analysis
    base = {"RunId": "run-1", "Config": "qwen3-1.7b/k7", "Load": "c4", "Variant": "speculative"}
    assert _expand(plan.datums, "AcceptanceRate", **base) == []
    assert _expand(plan.datums, "MeanAcceptanceLength", **base) == [2.0]
    summary = ensure_summary(RunFolder.open(run_dir))
    acc = summary.levels[0].variants["speculative"].acceptance
    assert acc is not None and acc.rate is None
    assert "NaN" not in summary.model_dump_json()  # strict JSON: no NaN anywhere


def test_timestamps_outside_cloudwatchs_window_fail_clearly(tmp_path: Path) -> None:
    now = time.time()
    old = RunFolder.open(make_run(tmp_path / "old", start=now - 15 * 86400, summary=False))
    plan = datums.build_metric_datums(old)
    with pytest.raises(PublishError) as e:
        limits.check_timestamps(plan.datums, now, run_id="run-1")
    assert "days ago" in str(e.value) and "14 days" in str(e.value) and "--retime" in str(e.value)

    future = RunFolder.open(make_run(tmp_path / "future", start=now + 3 * 3600, summary=False))
    with pytest.raises(PublishError, match="in the future.*2 hours ahead"):
        limits.check_timestamps(datums.build_metric_datums(future).datums, now, run_id="run-1")

    fresh = RunFolder.open(make_run(tmp_path / "fresh", start=now - 13 * 86400, summary=False))
    limits.check_timestamps(datums.build_metric_datums(fresh).datums, now, run_id="run-1")  # inside the window: fine


def test_settings_are_validated(tmp_path: Path) -> None:
    run = RunFolder.open(make_run(tmp_path, per_class=1, summary=False))
    with pytest.raises(ConfigError, match="reserved"):
        datums.build_metric_datums(run, namespace="AWS/EC2")
    with pytest.raises(ConfigError, match="storage_resolution=5"):
        datums.build_metric_datums(run, storage_resolution=5)
    high = datums.build_metric_datums(run, storage_resolution=1)
    assert {d["StorageResolution"] for d in high.datums} == {1}


def test_dimension_sets_are_consistent_and_small(tmp_path: Path) -> None:
    plan = datums.build_metric_datums(RunFolder.open(make_run(tmp_path, per_class=2, summary=False)))
    shapes = Counter(tuple(x["Name"] for x in d["Dimensions"]) for d in plan.datums)
    assert set(shapes) == {datums.DIMS_AGGREGATE, datums.DIMS_BY_CLASS}


def test_batch_hash_is_content_addressed(tmp_path: Path) -> None:
    run = RunFolder.open(make_run(tmp_path, per_class=2, summary=False))
    a = datums.batch_datums(datums.build_metric_datums(run).datums)
    b = datums.batch_datums(datums.build_metric_datums(run).datums)
    assert [datums.batch_hash(x, "Spectrn") for x in a] == [datums.batch_hash(x, "Spectrn") for x in b]
    assert datums.batch_hash(a[0], "Spectrn") != datums.batch_hash(a[0], "Other")
    shifted = datums.batch_datums(datums.build_metric_datums(run, time_shift_s=60).datums)
    assert datums.batch_hash(shifted[0], "Spectrn") != datums.batch_hash(a[0], "Spectrn")


def _datum(i: int) -> dict[str, Any]:
    return {
        "MetricName": "TTFT",
        "Dimensions": [{"Name": "RunId", "Value": f"r{i}"}],
        "Timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "Values": [0.1],
        "Counts": [1.0],
        "Unit": "Seconds",
        "StorageResolution": 60,
    }


def test_batches_are_cut_at_exactly_the_byte_budget() -> None:
    """The budget counts the request header (with the namespace, default Spectrn) plus every datum: a call of
    exactly the budget is kept whole, one byte less cuts it."""
    ds = [_datum(i) for i in range(3)]
    sizes = [limits.estimate_request_bytes(d) for d in ds]
    header = len("Action=PutMetricData&Version=2010-08-01&Namespace=") + len("Spectrn")
    exact = header + sum(sizes)
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=exact)] == [3]
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=exact - 1)] == [2, 1]
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=exact, namespace="Spectrn")] == [3]
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=exact, namespace="Spectrn2")] == [2, 1]
    two = header + sizes[0] + sizes[1]
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=two)] == [2, 1]
    assert [len(b) for b in datums.batch_datums(ds, max_bytes=two - 1)] == [1, 1, 1]
    assert datums.batch_datums([]) == []


def test_one_datum_over_the_budget_is_refused_by_name() -> None:
    d = _datum(0)
    n = limits.estimate_request_bytes(d)
    header = len("Action=PutMetricData&Version=2010-08-01&Namespace=Spectrn")
    assert datums.batch_datums([d], max_bytes=header + n) == [[d]]  # exactly the budget: fine
    with pytest.raises(PublishError) as e:
        datums.batch_datums([d], max_bytes=header + n - 1)
    assert e.value.message == f"one TTFT datum alone is {n} bytes, over the request budget"


def test_round_sig_keeps_the_smallest_value_cloudwatch_takes() -> None:
    assert datums.round_sig([1e-100, -1e-100, 1e-101], 4) == ([-1e-100, 0.0, 1e-100], [1.0, 1.0, 1.0])
    assert datums.round_sig([3, 3, 7], 2) == ([3.0, 7.0], [2.0, 1.0])  # integers are values too


def test_rounded_counts_fold_in_batches_to_exactly_round_sig_of_all_values() -> None:
    """Values counted as they arrive (folded whenever the shared buffer fills, several series interleaved) give
    per series exactly what rounding all of that series' values at once gives: the same rounded values, the
    same counts, zeros and the 9.9996 / 10.001 boundary merge included."""
    rng = random.Random(11)
    series: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    acc = datums.RoundedCounts(4, max_pending=37)  # small: many folds, each mid-series
    for _ in range(3000):
        key = rng.choice("abc")
        chunk = [rng.lognormvariate(-3, 2) for _ in range(rng.randint(0, 9))]
        chunk += rng.choice([[], [0.0], [9.9996, 10.001], [1e-300]])
        series[key].extend(chunk)
        acc.add(key, chunk)
        assert acc.n_pending < 37  # the buffer never holds the limit: it was folded
    got = acc.series()
    assert acc.n_pending == 0
    for key, values in series.items():
        want_values, want_counts = datums.round_sig(values, 4)
        assert sorted(got[key]) == want_values
        assert [float(got[key][v]) for v in want_values] == want_counts
        # and the counting lost nothing
        assert sum(got[key].values()) == len(values)
