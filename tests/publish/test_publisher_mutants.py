"""publish_run and publish_dashboard, what the audit left: the words of a publish refused while another process
holds the run folder, the whole outcome a person reads, the dashboard of several runs (a sweep's cells) under
one id with each run's own time shift, sent compact to the sink's region, and what a publish without a sink
asks of AWS (the credential check first, then a client with eight attempts)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import FakeSink
from doubles.runfactory import make_run
from spectrn.analyze.metrics import RequestMetrics
from spectrn.errors import PublishError
from spectrn.publish import publisher
from spectrn.publish.datums import default_metrics_fn
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
