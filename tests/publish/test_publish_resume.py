"""publish_run with a fake sink: progress in publish.json, part-way failures, idempotent re-runs, --force, --retime."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import FakeSink
from doubles.runfactory import make_run
from spectrn.errors import AnalysisError, PublishError
from spectrn.publish import dashboard, datums, publisher
from spectrn.run.folder import RunFolder


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path, per_class=6, start=time.time() - 3600, summary=False)


def _samples(sink: FakeSink) -> float:
    return sum(sum(d["Counts"]) for _, batch in sink.calls for d in batch)


def test_publish_sends_everything_once_and_records_it(run_dir: Path) -> None:
    sink = FakeSink()
    res = publisher.publish_run(run_dir, sink, max_datums_per_call=10)
    assert res.batches == len(sink.calls) == res.sent_now > 1
    assert res.already_sent == 0
    assert _samples(sink) == res.samples
    assert all(ns == "Spectrn" for ns, _ in sink.calls)
    assert list(sink.dashboards) == ["spectrn-run-1"]
    dashboard.validate_dashboard(sink.dashboards["spectrn-run-1"])
    state = json.loads((run_dir / "publish.json").read_text())
    target = state["targets"]["Spectrn@us-east-1@fake"]
    assert len(target["sent"]) == res.batches and target["dashboard"]["name"] == "spectrn-run-1"
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        ["run.json", "requests.jsonl", "acceptance.json", "publish.json"]
    )  # publish writes nothing but publish.json

    again = FakeSink()
    res2 = publisher.publish_run(run_dir, again, max_datums_per_call=10)
    assert again.calls == [] and res2.sent_now == 0 and res2.already_sent == res.batches  # idempotent


def test_failure_part_way_reports_sent_and_unsent_then_rerun_completes(run_dir: Path) -> None:
    total = len(datums.batch_datums(datums.build_metric_datums(RunFolder.open(run_dir)).datums, max_datums=10))
    failing = FakeSink(fail_calls={4})
    with pytest.raises(PublishError) as e:
        publisher.publish_run(run_dir, failing, max_datums_per_call=10)
    msg = str(e.value)
    assert "stopped at batch 4/" in msg and "simulated outage" in msg
    assert f"Sent: 3/{total} batches" in msg and f"not sent: {total - 3} batches" in msg
    assert "re-run `spectrn publish" in msg and "only the unsent batches" in msg
    assert e.value.sent_batches == 3 and e.value.unsent_batches == total - 3  # type: ignore[attr-defined]
    assert failing.dashboards == {}  # no dashboard for a half-published run
    rest = FakeSink()
    res = publisher.publish_run(run_dir, rest, max_datums_per_call=10)
    assert (res.already_sent, res.sent_now) == (3, total - 3) and len(failing.calls) + len(rest.calls) == total


def test_rerun_after_failure_sends_exactly_the_rest(run_dir: Path) -> None:
    first = FakeSink(fail_calls={3})
    with pytest.raises(PublishError):
        publisher.publish_run(run_dir, first, max_datums_per_call=10)
    state = json.loads((run_dir / "publish.json").read_text())["targets"]["Spectrn@us-east-1@fake"]
    assert len(state["sent"]) == 2 and state["last_error"]["batch"] == 2
    second = FakeSink()
    res = publisher.publish_run(run_dir, second, max_datums_per_call=10)
    assert res.already_sent == 2 and res.sent_now == res.batches - 2
    sent = [d for _, b in first.calls + second.calls for d in b]
    assert len(sent) == res.datums  # every datum exactly once across both attempts
    assert sum(sum(d["Counts"]) for d in sent) == res.samples
    state = json.loads((run_dir / "publish.json").read_text())["targets"]["Spectrn@us-east-1@fake"]
    assert state["last_error"] is None


def test_force_resends_everything(run_dir: Path) -> None:
    publisher.publish_run(run_dir, FakeSink(), max_datums_per_call=10)
    sink = FakeSink()
    res = publisher.publish_run(run_dir, sink, force=True, max_datums_per_call=10)
    assert res.sent_now == res.batches == len(sink.calls)


def test_another_namespace_is_another_target(run_dir: Path) -> None:
    publisher.publish_run(run_dir, FakeSink())
    sink = FakeSink()
    res = publisher.publish_run(run_dir, sink, namespace="Team/Spectrn")
    assert res.sent_now == res.batches and sink.calls[0][0] == "Team/Spectrn"


def test_old_run_needs_retime_and_retime_is_stable(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=2, start=time.time() - 20 * 86400, summary=False)
    with pytest.raises(PublishError, match="14 days"):
        publisher.publish_run(run_dir, FakeSink())
    assert not FakeSink().calls
    sink = FakeSink(fail_calls={2})
    with pytest.raises(PublishError):
        publisher.publish_run(run_dir, sink, retime=True, max_datums_per_call=5)
    stamps = [d["Timestamp"].timestamp() for _, b in sink.calls for d in b]
    assert stamps and all(time.time() - 3 * 3600 < s < time.time() for s in stamps)
    rest = FakeSink()
    res = publisher.publish_run(run_dir, rest, retime=True, max_datums_per_call=5)
    assert res.already_sent == 1 and res.sent_now == res.batches - 1  # same shift reused: same hashes
    body = json.loads(rest.dashboards["spectrn-run-1"])
    start = body["start"]
    assert start.startswith(time.strftime("%Y-%m-%d", time.gmtime(min(stamps))))


def test_changed_run_data_is_flagged(run_dir: Path) -> None:
    from spectrn.analyze.run import analyze_folder

    publisher.publish_run(run_dir, FakeSink(), dashboard=False)
    (run_dir / "acceptance.json").write_text(json.dumps({"speculative": {"rate": 0.5, "mean_accepted_length": 2.0}}))
    analyze_folder(run_dir)
    res = publisher.publish_run(run_dir, FakeSink(), dashboard=False)
    assert any("changed since the last publish" in w for w in res.warnings)


def test_corrupt_state_is_an_error_not_a_silent_resend(run_dir: Path) -> None:
    (run_dir / "publish.json").write_text("{not json")
    with pytest.raises(PublishError, match="publish.json is not valid JSON"):
        publisher.publish_run(run_dir, FakeSink())


def test_empty_run_is_refused(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=1, summary=False)
    (run_dir / "requests.jsonl").write_text("")
    with pytest.raises(AnalysisError, match="no measured requests"):
        publisher.publish_run(run_dir, FakeSink())


def test_the_outcome_is_returned_for_people(run_dir: Path) -> None:
    progress: list[tuple[int, int]] = []
    res = publisher.publish_run(run_dir, FakeSink(), progress=lambda done, total: progress.append((done, total)))
    text = "\n".join(res.describe())
    assert "published run run-1 to CloudWatch namespace Spectrn" in text and "dashboard: spectrn-run-1" in text
    assert progress and progress[-1] == (res.batches, res.batches)


def test_rerun_keeps_the_recorded_timestamps(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, per_class=2, start=time.time() - 20 * 86400, summary=False)
    with pytest.raises(PublishError):
        publisher.publish_run(run_dir, FakeSink(fail_calls={2}), retime=True, max_datums_per_call=5)
    rest = FakeSink()
    res = publisher.publish_run(run_dir, rest, max_datums_per_call=5)  # --retime forgotten on the re-run: same shift
    assert res.already_sent == 1 and res.sent_now == res.batches - 1 and res.time_shift_s != 0


def test_retime_after_a_normal_publish_is_refused(run_dir: Path) -> None:
    publisher.publish_run(run_dir, FakeSink())
    with pytest.raises(PublishError, match="count them twice"):
        publisher.publish_run(run_dir, FakeSink(), retime=True)
    res = publisher.publish_run(run_dir, FakeSink(), retime=True, force=True)
    assert res.time_shift_s != 0 and res.sent_now == res.batches


def test_concurrent_publish_of_one_run_is_refused(run_dir: Path) -> None:
    """A second publish while the first is sending would send the same unsent calls twice."""

    class SlowSink(FakeSink):
        def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
            if not self.calls:
                with pytest.raises(PublishError, match="run folder .* is in use by another spectrn process"):
                    publisher.publish_run(run_dir, FakeSink())
            super().put_metric_data(namespace, metric_data)

    res = publisher.publish_run(run_dir, SlowSink(), max_datums_per_call=10)
    assert res.sent_now == res.batches
    assert publisher.publish_run(run_dir, FakeSink(), max_datums_per_call=10).sent_now == 0  # the lock was released


def test_rerun_keeps_batch_boundaries_and_resolution(run_dir: Path) -> None:
    with pytest.raises(PublishError):
        publisher.publish_run(run_dir, FakeSink(fail_calls={3}), max_datums_per_call=10, storage_resolution=1)
    rest = FakeSink()
    res = publisher.publish_run(
        run_dir, rest
    )  # defaults now: 1000 per call, resolution 60 -> the recorded ones are kept
    assert res.already_sent == 2 and res.sent_now == res.batches - 2
    assert {d["StorageResolution"] for _, b in rest.calls for d in b} == {1}
    assert any("kept max_datums_per_call=10" in w for w in res.warnings)
    assert any("kept storage_resolution=1" in w for w in res.warnings)


def test_ctrl_c_during_a_call_records_it_and_the_rerun_never_sends_a_batch_twice(run_dir: Path) -> None:
    """Ctrl-C arrives while CloudWatch is taking call 3: the call completes and is recorded before the publish
    stops, so the re-run sends exactly the other batches (CloudWatch would count a resent batch twice)."""
    import os
    import signal

    class CtrlCDuringCall(FakeSink):
        def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
            if len(self.calls) == 2:
                os.kill(os.getpid(), signal.SIGINT)  # delivered while this call is in flight
            super().put_metric_data(namespace, metric_data)

    first = CtrlCDuringCall()
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever ran pytest
    try:
        with pytest.raises(KeyboardInterrupt):
            publisher.publish_run(run_dir, first, max_datums_per_call=10)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is restored
    finally:
        signal.signal(signal.SIGINT, outer)
    assert len(first.calls) == 3
    state = json.loads((run_dir / "publish.json").read_text())["targets"]["Spectrn@us-east-1@fake"]
    assert sorted(v["index"] for v in state["sent"].values()) == [0, 1, 2]
    rest = FakeSink()
    res = publisher.publish_run(run_dir, rest, max_datums_per_call=10)
    assert res.already_sent == 3 and res.sent_now == res.batches - 3
    keys = [datums.batch_hash(b, ns) for ns, b in first.calls + rest.calls]
    assert len(keys) == len(set(keys)) == res.batches  # every batch sent, none twice


def test_an_ignored_sigint_stays_ignored_during_a_publish(run_dir: Path) -> None:
    """Under nohup, or started with `&` by a script, SIGINT is ignored: a publish must not start honouring it."""
    import os
    import signal

    class SigintDuringCall(FakeSink):
        def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
            if len(self.calls) == 2:
                os.kill(os.getpid(), signal.SIGINT)
            super().put_metric_data(namespace, metric_data)

    sink = SigintDuringCall()
    outer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        res = publisher.publish_run(run_dir, sink, max_datums_per_call=10)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, outer)
    assert res.sent_now == res.batches == len(sink.calls) > 3  # every batch sent: the signal stopped nothing


def test_a_hand_edited_ledger_is_an_error_not_a_traceback(run_dir: Path) -> None:
    (run_dir / "publish.json").write_text(json.dumps({"version": 1, "targets": {"x": "us-east-1"}}))
    with pytest.raises(PublishError, match="unknown layout"):
        publisher.publish_run(run_dir, FakeSink())
