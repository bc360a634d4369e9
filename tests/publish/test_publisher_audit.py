"""publish_run's record and words, checked call by call against what the fake sink accepted: every field of
the ledger's target, progress after each call, the outcome and failure messages with their numbers, the
``--retime`` shift on the data and the dashboard, and which target's shift a later dashboard reuses."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import FakeSink
from doubles.runfactory import make_run
from spectrn.analyze.metrics import RequestMetrics
from spectrn.errors import PublishError
from spectrn.publish import publisher
from spectrn.publish.datums import default_metrics_fn
from spectrn.run.records import RequestRecord

T0 = 1_790_000_000.0
NOW = T0 + 3600  # an hour after the run: inside CloudWatch's window


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, per_class=1, start=T0, summary=False)


def _target(run_dir: Path, key: str) -> dict[str, Any]:
    return json.loads((run_dir / "publish.json").read_text())["targets"][key]


def _datums(sink: FakeSink) -> int:
    return sum(len(b) for _, b in sink.calls)


def _samples(sink: FakeSink) -> int:
    return int(sum(sum(d["Counts"]) for _, b in sink.calls for d in b))


def test_every_call_is_recorded_in_order_with_progress_after_each(run_dir: Path) -> None:
    sink = FakeSink(region="eu-west-1", now=NOW)
    progress: list[tuple[int, int]] = []
    res = publisher.publish_run(run_dir, sink, now=NOW, max_datums_per_call=10, progress=lambda *a: progress.append(a))
    n = len(sink.calls)
    assert n > 2 and progress == [(i, n) for i in range(1, n + 1)]
    t = _target(run_dir, "Spectrn@eu-west-1@fake")
    calls = sorted(t["sent"].values(), key=lambda c: c["index"])
    assert [(c["index"], c["datums"]) for c in calls] == [(i, len(b)) for i, (_, b) in enumerate(sink.calls)]
    keys = ("namespace", "target", "run_id", "batches", "datums", "samples", "time_shift_s", "max_datums_per_call",
            "storage_resolution", "nonfinite_dropped", "last_error")  # fmt: skip
    fields = {k: t[k] for k in keys}
    assert fields == {"namespace": "Spectrn", "target": "eu-west-1@fake", "run_id": "run-1", "batches": n,
                      "datums": _datums(sink), "samples": _samples(sink), "time_shift_s": 0.0,
                      "max_datums_per_call": 10, "storage_resolution": 60, "nonfinite_dropped": [],
                      "last_error": None}  # fmt: skip
    assert t["dashboard"]["name"] == "spectrn-run-1"
    assert res.describe()[0] == (
        f"published run run-1 to CloudWatch namespace Spectrn (eu-west-1@fake): {n} PutMetricData calls now, "
        f"0 already sent earlier, {n} in all ({_datums(sink)} datums, {_samples(sink)} samples)"
    )
    body = json.loads(sink.dashboards["spectrn-run-1"])
    assert {w["properties"]["region"] for w in body["widgets"][1:]} == {"eu-west-1"}  # the sink's region
    again = publisher.publish_run(
        run_dir, FakeSink(region="eu-west-1", now=NOW), now=NOW, max_datums_per_call=10, dashboard=False
    )
    assert again.warnings == []  # the same data again: nothing changed, nothing to warn about
    assert again.describe()[0].endswith(f"0 PutMetricData calls now, {n} already sent earlier, {n} in all "
                                        f"({_datums(sink)} datums, {_samples(sink)} samples)")  # fmt: skip


def test_a_failure_names_the_batch_and_counts_what_was_and_was_not_sent(run_dir: Path) -> None:
    plan_sink = FakeSink(now=NOW)
    whole = publisher.publish_run(run_dir, plan_sink, now=NOW, max_datums_per_call=10, force=True, dashboard=False)
    (run_dir / "publish.json").unlink()
    sink = FakeSink(fail_calls={3}, now=NOW)
    with pytest.raises(PublishError) as e:
        publisher.publish_run(run_dir, sink, now=NOW, max_datums_per_call=10)
    n, sent = whole.batches, _datums(sink)  # calls 1 and 2 went through
    msg = e.value.message
    assert f"stopped at batch 3/{n}: PutMetricData failed: InternalFailure: simulated outage." in msg
    assert f"Sent: 2/{n} batches (2 in this attempt, 0 earlier, {sent} datums)" in msg
    assert f"not sent: {n - 2} batches ({whole.datums - sent} datums)" in msg
    t = _target(run_dir, "Spectrn@us-east-1@fake")
    assert t["last_error"]["batch"] == 2 and "simulated outage" in t["last_error"]["message"]


def test_retime_shifts_the_data_and_the_dashboard_to_end_two_minutes_before_now(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    now = T0 + 20 * 86400  # 20 days later: too old without --retime
    sink = FakeSink(now=now)
    res = publisher.publish_run(run_dir, sink, now=now, retime=True)
    recs = [RequestRecord.model_validate_json(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in recs if not r.warmup]
    first = min(r.sent_at for r in measured)
    last_end = max(r.sent_at + r.e2e for r in measured if r.e2e is not None)
    shift = math.floor((now - 120 - last_end) / 60) * 60  # whole minutes, ending at least 2 minutes ago
    assert res.time_shift_s == shift
    assert f"timestamps shifted by {shift / 86400:+.2f} days (--retime)" in res.describe()
    stamps = [d["Timestamp"].timestamp() for _, b in sink.calls for d in b]
    assert min(stamps) == math.floor(first / 60) * 60 + shift
    body = json.loads(sink.dashboards["spectrn-run-1"])
    from datetime import UTC, datetime

    assert body["start"] == datetime.fromtimestamp(first + shift - 60, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert publisher.recorded_time_shift(run_dir, "Spectrn") == shift


def test_a_later_dashboard_reuses_the_shift_of_its_own_target(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    now = T0 + 86400
    east = publisher.publish_run(run_dir, FakeSink(now=now), now=now, retime=True, dashboard=False)
    west = publisher.publish_run(run_dir, FakeSink(region="us-west-2", now=now), now=now, dashboard=False)
    assert east.time_shift_s > 0 and west.time_shift_s == 0.0
    assert publisher.recorded_time_shift(run_dir, "Spectrn", "us-east-1@fake") == east.time_shift_s
    assert publisher.recorded_time_shift(run_dir, "Spectrn", "us-west-2@fake") == 0.0
    assert publisher.recorded_time_shift(run_dir, "Other") == 0.0


def test_dropped_non_finite_values_are_recorded_and_said(run_dir: Path) -> None:
    base = default_metrics_fn(1.0)

    def nan_ttft(rec: RequestRecord) -> RequestMetrics | None:
        m = base(rec)
        return None if m is None else replace(m, ttft=math.nan)

    res = publisher.publish_run(run_dir, FakeSink(now=NOW), now=NOW, skip_nonfinite=True, metrics_fn=nan_ttft)
    dropped = _target(run_dir, "Spectrn@us-east-1@fake")["nonfinite_dropped"]
    # make_run(per_class=1): 2 classes x 1 prompt x 2 variants completed, each TTFT NaN
    assert len(dropped) == 4 and dropped == res.nonfinite_dropped
    assert "dropped 4 non-finite values (listed in publish.json)" in res.describe()
