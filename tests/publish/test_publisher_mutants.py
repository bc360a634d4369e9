"""publish_run and publish_dashboard, what the audit left: the words of a publish refused while another process
holds the run folder, the whole outcome a person reads, the dashboard of several runs (a sweep's cells) under
one id with each run's own time shift, sent compact to the sink's region, and what a publish without a sink
asks of AWS (the credential check first, then a client with eight attempts); then the whole words of every
refusal and warning (a reserved namespace, a summary left without records, a run too old, --retime after a
publish at the original times, kept batch size and resolution, changed data, SIGTERM), a sweep's id on every
series, the ledger's keys and digest in the format earlier versions wrote, --retime of a run whose every request
failed, --force publishing afresh, and a long namespace counted in the size of every call."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import FakeSink
from doubles.runfactory import make_records, make_run
from spectrn.analyze.metrics import RequestMetrics
from spectrn.errors import ConfigError, PublishError, Terminated
from spectrn.publish import publisher
from spectrn.publish.datums import default_metrics_fn
from spectrn.publish.limits import estimate_request_bytes
from spectrn.run.folder import RunFolder
from spectrn.run.lock import hold_run_folder
from spectrn.run.records import RequestRecord

T0 = 1_790_000_000.0
NOW = T0 + 3600


def _first_send(run_dir: Path) -> float:
    recs = [RequestRecord.model_validate_json(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    return min(r.sent_at for r in recs if not r.warmup)


def test_a_publish_while_another_process_holds_the_folder_says_what_to_do_and_sends_nothing(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    sink = FakeSink(now=NOW)
    with hold_run_folder(run_dir), pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, sink, now=NOW)
    assert (err.value.message, err.value.hint) == (
        f"run folder {run_dir} is in use by another spectrn process right now",
        "wait for it to finish (another publish, or a bench or analyze still writing it); then re-run to send "
        "anything not sent yet",
    )
    assert sink.calls == [] and not (run_dir / "publish.json").exists()


def test_the_outcome_a_person_reads_line_by_line(tmp_path: Path) -> None:
    result = publisher.PublishResult(
        run_id="r7", namespace="Team/Spec", target="eu-west-1", batches=12, sent_now=5, already_sent=7, datums=230,
        samples=41_000, dashboard="team-r7", dashboard_messages=["widget 3: no data"], state_path=tmp_path / "p.json",
        nonfinite_dropped=["a", "b"], time_shift_s=1_731_900.0, warnings=["clock skew"],
    )  # fmt: skip
    assert result.describe() == [
        "published run r7 to CloudWatch namespace Team/Spec (eu-west-1): 5 PutMetricData calls now, 7 already sent "
        "earlier, 12 in all (230 datums, 41000 samples)",
        f"progress: {tmp_path / 'p.json'}",
        # 1,731,900 s = 20.045139 days: "+20.05" (over 86,401 s it would read +20.04)
        "timestamps shifted by +20.05 days (--retime)",
        "dropped 2 non-finite values (listed in p.json)",
        "dashboard: team-r7",
        "dashboard note: widget 3: no data",
        "warning: clock skew",
    ]


def test_a_sweeps_cells_share_one_compact_dashboard_under_its_id_each_at_its_own_shift(tmp_path: Path) -> None:
    a = make_run(tmp_path / "a", per_class=1, start=T0, summary=False)
    b = make_run(tmp_path / "b", "run-2", per_class=1, start=T0 + 3600, summary=False)
    sink = FakeSink(region="eu-west-1", now=NOW)
    shift_b = -7200.0  # cell b's data went out two hours early (its own --retime)
    name, messages = publisher.publish_dashboard(
        [(RunFolder.open(a), 0.0), (RunFolder.open(b), shift_b)], sink, namespace="Team", prefix="team",
        run_id="sweep-1",
    )  # fmt: skip
    assert (name, messages, list(sink.dashboards)) == ("team-sweep-1", [], ["team-sweep-1"])
    text = sink.dashboards["team-sweep-1"]
    body = json.loads(text)
    assert text == json.dumps(body, separators=(",", ":"))  # compact: no space after ',' or ':'
    # b starts an hour after a but was shifted two hours back: it opens the range, a minute before its first send
    start = min(_first_send(a), _first_send(b) + shift_b) - 60
    assert body["start"] == datetime.fromtimestamp(start, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    metric_widgets = [w for w in body["widgets"] if w["type"] == "metric"]
    assert metric_widgets and {w["properties"]["region"] for w in metric_widgets} == {"eu-west-1"}
    run_ids = {m[m.index("RunId") + 1] for w in metric_widgets for m in w["properties"]["metrics"] if "RunId" in m}
    assert run_ids == {"sweep-1"}  # every series under the sweep's id, none under run-1 or run-2


class _Recorder(FakeSink):
    made: list[dict[str, Any]] = []

    def __init__(self, region: str | None = None, endpoint_url: str | None = None, max_attempts: int = 0) -> None:
        super().__init__(region=region or "none", now=NOW)
        _Recorder.made.append({"region": region, "endpoint_url": endpoint_url, "max_attempts": max_attempts})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, str | None]]:
    checked: list[tuple[Path, str | None]] = []
    monkeypatch.setattr(publisher, "require_aws", lambda run_dir, region: checked.append((run_dir, region)))
    monkeypatch.setattr(publisher, "Boto3Sink", _Recorder)
    _Recorder.made = []
    return checked


def test_without_a_sink_the_credentials_are_checked_for_the_run_then_a_client_of_eight_attempts_is_made(
    tmp_path: Path, aws: list[tuple[Path, str | None]]
) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    publisher.publish_run(run_dir, now=NOW, dashboard=False)  # cloudwatch.region defaults to none: the AWS chain
    publisher.publish_run(run_dir, region="eu-west-1", now=NOW, dashboard=False, force=True)
    assert aws == [(run_dir, None), (run_dir, "eu-west-1")]
    assert _Recorder.made == [
        {"region": None, "endpoint_url": None, "max_attempts": 8},
        {"region": "eu-west-1", "endpoint_url": None, "max_attempts": 8},
    ]


def test_an_endpoint_url_skips_the_credential_check(tmp_path: Path, aws: list[tuple[Path, str | None]]) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    publisher.publish_run(run_dir, endpoint_url="http://127.0.0.1:5000", max_attempts=3, now=NOW, dashboard=False)
    assert aws == []  # a local endpoint (moto, LocalStack) is not AWS: no check of the AWS chain
    assert _Recorder.made == [{"region": None, "endpoint_url": "http://127.0.0.1:5000", "max_attempts": 3}]


def test_a_non_finite_value_stops_a_publish_unless_asked_to_skip_it(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    base = default_metrics_fn(1.0)

    def inf_e2e(rec: RequestRecord) -> RequestMetrics | None:
        m = base(rec)
        return None if m is None else m.__class__(**{**m.__dict__, "e2e": math.inf})

    sink = FakeSink(now=NOW)
    with pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, sink, now=NOW, metrics_fn=inf_e2e)
    assert (err.value.message, err.value.hint) == (
        "run run-1: 4 non-finite value(s) (NaN/Inf), which CloudWatch rejects: "
        "E2ELatency of baseline request 0 (structured-0) is inf; E2ELatency of speculative request 0 (structured-0) "
        "is inf; E2ELatency of baseline request 1 (open-1) is inf; E2ELatency of speculative request 1 (open-1) is inf",
        "fix the records (re-run `spectrn analyze` or the bench), or pass --skip-nonfinite to drop those values; "
        "dropped values are listed in publish.json",
    )
    assert sink.calls == [] and not (run_dir / "publish.json").exists()


def _ledger(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "publish.json").read_text())["targets"]["Spectrn@us-east-1@fake"]


def test_a_sweep_id_names_every_series_the_ledger_and_the_dashboard(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    sink = FakeSink(now=NOW)
    res = publisher.publish_run(run_dir, sink, now=NOW, run_id="sweep-7")
    dims = [dim for _, batch in sink.calls for d in batch for dim in d["Dimensions"]]
    run_ids = {dim["Value"] for dim in dims if dim["Name"] == "RunId"}
    assert run_ids == {"sweep-7"}  # none under the folder's own id, run-1
    assert (res.run_id, res.dashboard, list(sink.dashboards)) == ("sweep-7", "spectrn-sweep-7", ["spectrn-sweep-7"])
    assert (_ledger(run_dir)["run_id"], _ledger(run_dir)["dashboard"]["name"]) == ("sweep-7", "spectrn-sweep-7")


def test_a_reserved_namespace_is_refused_before_anything_is_sent_or_written(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    sink = FakeSink(now=NOW)
    with pytest.raises(ConfigError) as err:
        publisher.publish_run(run_dir, sink, now=NOW, namespace="AWS/Spectrn")
    assert (err.value.message, err.value.hint) == (
        "CloudWatch namespace 'AWS/Spectrn' starts with 'AWS/', which is reserved for AWS services",
        "use your own namespace, e.g. Spectrn",
    )
    assert sink.calls == [] and not (run_dir / "publish.json").exists()


def test_a_summary_left_without_its_records_has_nothing_to_publish(tmp_path: Path) -> None:
    # a baseline-only run (no acceptance figures) analyzed, then its requests.jsonl emptied: the summary.json
    # that remains is read as is, and no record is left to make a datum from
    recs = [r for r in make_records(per_class=1, errors=0, start=T0) if r.variant == "baseline"]
    run_dir = make_run(tmp_path, records=recs)
    (run_dir / "requests.jsonl").write_text("")
    sink = FakeSink(now=NOW)
    with pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, sink, now=NOW)
    assert (err.value.message, err.value.hint) == (
        "run run-1 has no measured requests to publish",
        "check requests.jsonl",
    )
    assert sink.calls == [] and not (run_dir / "publish.json").exists()


def test_a_run_older_than_fourteen_days_is_refused_with_its_age_and_the_way_out(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    now = T0 + 20 * 86400
    sink = FakeSink(now=now)
    with pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, sink, now=now)
    # the oldest datum is the minute of the first send: 1_789_999_980 = 2026-09-21 14:13:00 UTC, 20.0002 days back
    assert (err.value.message, err.value.hint) == (
        "run run-1 has data from 2026-09-21T14:13:00Z, 20.0 days ago; CloudWatch accepts timestamps at most 14 "
        "days old",
        "pass --retime to publish the same distributions with timestamps shifted so the run ends now "
        "(requests.jsonl keeps the original times; the shift is recorded in publish.json)",
    )
    assert sink.calls == []


def test_retime_of_a_run_where_every_request_failed_counts_from_its_start(tmp_path: Path) -> None:
    # two failed requests, at T0 and T0 + 7 s: no request completed, so the run has no time range; the shift
    # ends the run's start 2 minutes before now, in whole minutes: floor((20 days - 120 s) / 60) * 60
    run_dir = make_run(tmp_path, per_class=0, errors=2, start=T0, summary=False)
    now = T0 + 20 * 86400
    sink = FakeSink(now=now)
    res = publisher.publish_run(run_dir, sink, now=now, retime=True)
    assert res.time_shift_s == 1_727_880.0
    # every datum (the errors, the acceptance figures) is in the run's one minute, 14:13 UTC, shifted
    stamps = {d["Timestamp"] for _, batch in sink.calls for d in batch}
    assert stamps == {datetime(2026, 10, 11, 14, 11, tzinfo=UTC)}  # 1_789_999_980 + 1_727_880 = 1_791_727_860


def test_the_ledger_keys_each_call_by_its_namespace_and_content_and_dates_the_publish(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    sink = FakeSink(now=NOW)
    publisher.publish_run(run_dir, sink, now=NOW, max_datums_per_call=10, dashboard=False)
    target = _ledger(run_dir)

    def canonical(d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "Timestamp": int(d["Timestamp"].timestamp())}

    expected = [
        hashlib.sha256(
            json.dumps(["Spectrn", [canonical(d) for d in batch]], sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()[:32]
        for _, batch in sink.calls
    ]  # what earlier versions wrote: a ledger they left resumes without resending a call
    assert len(expected) > 2
    assert sorted(target["sent"], key=lambda h: target["sent"][h]["index"]) == expected
    assert target["plan_digest"] == hashlib.sha256("".join(expected).encode()).hexdigest()[:32]
    assert target["updated_at"] == "2026-09-21T15:13:20Z"  # NOW, the publish's own clock


def test_retime_after_a_publish_at_the_original_times_is_refused_in_words(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    publisher.publish_run(run_dir, FakeSink(now=NOW), now=NOW, dashboard=False)
    sink = FakeSink(now=NOW)
    with pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, sink, now=NOW, retime=True)
    assert (err.value.message, err.value.hint) == (
        "run run-1 was already published to Spectrn (us-east-1@fake) with its original timestamps; --retime would "
        "send the same samples again at new times (CloudWatch would count them twice)",
        "re-run without --retime to finish that publish, or pass --force to publish a second copy",
    )
    assert sink.calls == []


def test_a_rerun_keeps_the_earlier_batch_size_and_resolution_and_says_so(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    with pytest.raises(PublishError):
        publisher.publish_run(
            run_dir, FakeSink(fail_calls={3}, now=NOW), now=NOW, max_datums_per_call=10, storage_resolution=1
        )
    res = publisher.publish_run(run_dir, FakeSink(now=NOW), now=NOW, dashboard=False)
    assert res.warnings == [
        "kept max_datums_per_call=10 of the earlier publish (not 1000): changing it now would send samples twice",
        "kept storage_resolution=1 of the earlier publish (not 60): changing it now would send samples twice",
    ]


def test_force_publishes_afresh_with_the_batch_size_and_resolution_asked_now(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    first = publisher.publish_run(
        run_dir, FakeSink(now=NOW), now=NOW, max_datums_per_call=10, storage_resolution=1, dashboard=False
    )
    assert first.batches > 1
    sink = FakeSink(now=NOW)
    res = publisher.publish_run(run_dir, sink, now=NOW, force=True, dashboard=False)
    assert res.warnings == []  # nothing kept: --force sends a second copy, as asked
    assert (res.batches, res.sent_now, res.already_sent) == (1, 1, 0)  # all the run's datums fit one call of 1000
    assert {d["StorageResolution"] for _, batch in sink.calls for d in batch} == {60}
    target = _ledger(run_dir)
    assert (target["max_datums_per_call"], target["storage_resolution"]) == (1000, 60)


def test_changed_run_data_is_said_in_words(tmp_path: Path) -> None:
    from spectrn.analyze.run import analyze_folder

    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    publisher.publish_run(run_dir, FakeSink(now=NOW), now=NOW, dashboard=False)
    (run_dir / "acceptance.json").write_text(json.dumps({"speculative": {"rate": 0.5, "mean_accepted_length": 2.0}}))
    analyze_folder(run_dir)
    res = publisher.publish_run(run_dir, FakeSink(now=NOW), now=NOW, dashboard=False)
    assert res.warnings == [
        "the run's data changed since the last publish to this target; batches whose content changed are sent "
        "again and CloudWatch keeps the earlier values too"
    ]


def test_sigterm_during_a_call_records_it_then_stops_with_exit_143_and_the_way_to_resume(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)

    class SigtermDuringCall(FakeSink):
        def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
            if len(self.calls) == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # delivered while call 2 is in flight
            super().put_metric_data(namespace, metric_data)

    def outer(signum: int, frame: Any) -> None:
        raise AssertionError("SIGTERM reached the handler outside the publish")

    sink = SigtermDuringCall(now=NOW)
    before = signal.signal(signal.SIGTERM, outer)
    try:
        with pytest.raises(Terminated) as err:
            publisher.publish_run(run_dir, sink, now=NOW, max_datums_per_call=10)
        assert signal.getsignal(signal.SIGTERM) is outer  # the handler is restored
    finally:
        signal.signal(signal.SIGTERM, before)
    assert (err.value.message, err.value.hint, err.value.exit_code) == (
        f"stopped by SIGTERM during publish; the call in flight was recorded in {run_dir / 'publish.json'}",
        f"re-run `spectrn publish {run_dir}`: only the unsent batches are sent",
        143,
    )
    assert len(sink.calls) == 2 and sorted(c["index"] for c in _ledger(run_dir)["sent"].values()) == [0, 1]


def test_without_a_dashboard_the_outcome_names_none(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, start=T0, summary=False)
    sink = FakeSink(now=NOW)
    res = publisher.publish_run(run_dir, sink, now=NOW, dashboard=False)
    assert (res.dashboard, sink.dashboards, _ledger(run_dir)["dashboard"]) == (None, {}, None)


def test_a_long_namespace_counts_in_the_size_of_every_call(tmp_path: Path) -> None:
    # 4 requests, each with 1188 distinct per-token gaps: 108 ITL datums of up to 150 values whose estimated
    # sizes add up to just under the 950,000-byte budget with the 7-character namespace Spectrn, but over it
    # with this one of 255 (each '#' is 3 bytes encoded): the last datum goes in a call of its own
    namespace = "Spectrn/" + "#" * 247
    run_dir = make_run(tmp_path, per_class=1, errors=0, start=T0, summary=False)
    base = default_metrics_fn(1.0)

    def many_gaps(rec: RequestRecord) -> RequestMetrics | None:
        m = base(rec)
        if m is None:
            return None
        r = 2 * rec.index + (rec.variant == "speculative")
        gaps = tuple(round(0.1 + (r * 1188 + j) * 1e-4, 4) for j in range(1188))
        return m.__class__(**{**m.__dict__, "gaps": gaps, "gap_tokens": (1,) * 1188})

    sink = FakeSink(now=NOW)
    publisher.publish_run(run_dir, sink, now=NOW, namespace=namespace, metrics_fn=many_gaps, dashboard=False)
    action = len("Action=PutMetricData&Version=2010-08-01&Namespace=")
    header = action + len("Spectrn/") + 3 * 247
    sizes = [header + sum(estimate_request_bytes(d) for d in batch) for _, batch in sink.calls]
    assert len(sizes) == 2 and max(sizes) <= 950_000
    first, second = sink.calls[0][1], sink.calls[1][1]
    assert sizes[0] + estimate_request_bytes(second[0]) > 950_000  # the first call is as full as the budget allows
    assert action + len("Spectrn") + sum(estimate_request_bytes(d) for d in first + second) <= 950_000  # one call
