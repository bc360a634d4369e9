"""CloudWatch's service-side limits: the doubles enforce them, spectrn's publisher never trips them, and a sink
that refuses a call gives a clean PublishError and a ledger a re-run resumes from, sending each batch once.

Also: a 2xx that is not CloudWatch's answer is not a sent batch, no endpoint password reaches publish.json or the
terminal, and the region hint names the variable boto3 reads.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doubles.cwfakes import MAX_REQUEST_BYTES, CloudWatchDouble, FakeSink, json_body_bytes, put_metric_data_fault
from doubles.runfactory import make_run
from spectrn.cli.main import main
from spectrn.errors import PublishError
from spectrn.publish import datums, publisher
from spectrn.run.folder import RunFolder

REGION = "us-east-1"
NOW = 1_800_000_000.0


def datum(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "MetricName": "TTFT",
        "Dimensions": [{"Name": "RunId", "Value": "r1"}],
        "Timestamp": datetime.fromtimestamp(NOW - 60, tz=UTC),
        "Values": [0.1, 0.2],
        "Counts": [1.0, 2.0],
        "Unit": "Seconds",
        "StorageResolution": 60,
    }
    d.update(over)
    return {k: v for k, v in d.items() if v is not None}


def fault(data: list[dict[str, Any]], namespace: str = "Spectrn", request_bytes: int = 100) -> tuple[int, str, str]:
    f = put_metric_data_fault(namespace, data, now=NOW, request_bytes=request_bytes)
    assert f is not None
    return f.status, f.code, f.message


# ---- each limit -----------------------------------------------------------------------------------------------


def test_a_well_formed_call_is_accepted() -> None:
    assert put_metric_data_fault("Spectrn", [datum()] * 1000, now=NOW, request_bytes=999_999) is None


@pytest.mark.parametrize(
    ("data", "namespace", "size", "expect"),
    [
        ([datum()] * 1001, "Spectrn", 100, (400, "InvalidParameterValue", "must not have a size greater than 1000")),
        ([datum()], "Spectrn", MAX_REQUEST_BYTES + 1, (413, "RequestEntityTooLarge", "exceeded 1000000 bytes")),
        (
            [datum(Values=[float(i) for i in range(151)], Counts=[1.0] * 151)],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "MetricData.member.1.Values must not have a size greater than 150"),
        ),
        (
            [datum(Counts=[1.0])],
            "Spectrn",
            100,
            (
                400,
                "InvalidParameterValue",
                "The parameters MetricData.member.1.Values and MetricData.member.1.Counts must be of the same size.",
            ),
        ),
        (
            [datum(Value=1.0)],
            "Spectrn",
            100,
            (400, "InvalidParameterCombination", "Value and MetricData.member.1.Values are mutually exclusive"),
        ),
        (
            [datum(Values=None, Counts=None)],
            "Spectrn",
            100,
            (400, "InvalidParameterCombination", "At least one of the parameters MetricData.member.1.Value and"),
        ),
        (
            [datum(Dimensions=[{"Name": f"D{i}", "Value": "x"} for i in range(31)])],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "Dimensions must not have a size greater than 30"),
        ),
        (
            [datum(), datum(Timestamp=datetime.fromtimestamp(NOW - 15 * 86400, tz=UTC))],
            "Spectrn",
            100,
            (
                400,
                "InvalidParameterValue",
                "The parameter MetricData.member.2.Timestamp must specify a time within the past two weeks.",
            ),
        ),
        (
            [datum(Timestamp=datetime.fromtimestamp(NOW + 3 * 3600, tz=UTC))],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "Timestamp must specify a time no more than two hours in the future"),
        ),
        ([datum(StorageResolution=5)], "Spectrn", 100, (400, "InvalidParameterValue", "StorageResolution is invalid")),
        (
            [datum(), datum(Values=[0.1, float("nan")])],
            "Spectrn",
            100,
            (
                400,
                "InvalidParameterValue",
                "The value NaN for parameter MetricData.member.2.Values.member.2 is invalid.",
            ),
        ),
        ([datum(Values=[float("inf"), 1.0])], "Spectrn", 100, (400, "InvalidParameterValue", "The value Infinity")),
        ([datum(Values=[1e109, 1.0])], "Spectrn", 100, (400, "InvalidParameterValue", "The value 1e+109 for")),
        ([datum(Values=[1e-110, 1.0])], "Spectrn", 100, (400, "InvalidParameterValue", "The value 1e-110 for")),
        ([datum(Unit="Minutes")], "Spectrn", 100, (400, "InvalidParameterValue", "Unit must be a value in the set [")),
        (
            [datum()],
            "AWS/EC2",
            100,
            (400, "InvalidParameterValue", "The value AWS/ for parameter Namespace is invalid."),
        ),
        ([datum()], "", 100, (400, "MissingParameter", "The parameter Namespace is required.")),
        ([datum()], ":x", 100, (400, "InvalidParameterValue", "for parameter Namespace is invalid")),
        ([datum()], "N" * 256, 100, (400, "InvalidParameterValue", "for parameter Namespace is invalid")),
        (
            [datum(Dimensions=[{"Name": "n" * 256, "Value": "x"}])],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "Dimensions.member.1.Name is invalid"),
        ),
        (
            [datum(Dimensions=[{"Name": "RunId", "Value": "v" * 1025}])],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "Dimensions.member.1.Value is invalid"),
        ),
        (
            [datum(Dimensions=[{"Name": "RunId", "Value": "   "}])],
            "Spectrn",
            100,
            (400, "InvalidParameterValue", "Dimensions.member.1.Value is invalid"),
        ),
        ([datum(MetricName="m" * 256)], "Spectrn", 100, (400, "InvalidParameterValue", "MetricName is invalid")),
    ],
    ids=[
        "1001-datums",
        "over-1MB",
        "151-values",
        "counts-length",
        "value-and-values",
        "no-value",
        "31-dimensions",
        "older-than-2-weeks",
        "over-2h-ahead",
        "resolution-5",
        "nan",
        "infinity",
        "too-large",
        "too-small",
        "unit",
        "aws-namespace",
        "no-namespace",
        "colon-namespace",
        "long-namespace",
        "long-dimension-name",
        "long-dimension-value",
        "blank-dimension-value",
        "long-metric-name",
    ],
)
def test_each_limit_is_refused_with_the_services_code(
    data: list[dict[str, Any]], namespace: str, size: int, expect: tuple[int, str, str]
) -> None:
    status, code, message = fault(data, namespace, size)
    assert (status, code) == expect[:2]
    assert expect[2] in message


def test_limits_allow_what_cloudwatch_allows_at_the_edges() -> None:
    edge = datum(
        Values=[float(i + 1) for i in range(150)],
        Counts=[1.0] * 150,
        Dimensions=[{"Name": f"D{i}", "Value": "v" * 1024} for i in range(30)],
        Timestamp=datetime.fromtimestamp(NOW - 14 * 86400 + 60, tz=UTC),
        StorageResolution=1,
    )
    assert put_metric_data_fault("N" * 255, [edge, datum(Values=[0.0, 1e108])], now=NOW, request_bytes=10) is None


def test_a_refusal_rejects_the_whole_call() -> None:
    sink = FakeSink(now=NOW)
    with pytest.raises(PublishError, match="PutMetricData failed: InvalidParameterValue: The value NaN"):
        sink.put_metric_data("Spectrn", [datum(), datum(Values=[float("nan"), 1.0])])
    assert sink.calls == [] and [f.code for f in sink.faults] == ["InvalidParameterValue"]


# ---- spectrn's publisher never trips them --------------------------------------------------------------------


def _recent_run(tmp_path: Path, per_class: int, **kw: Any) -> Path:
    span = per_class * 2 * 7.0  # make_records spaces requests 7 s apart
    return make_run(tmp_path, per_class=per_class, start=time.time() - span - 600, summary=False, **kw)


def test_the_publisher_never_trips_a_limit_in_memory(tmp_path: Path) -> None:
    run_dir = _recent_run(tmp_path, per_class=700, tokens=64)
    sink = FakeSink()
    for resolution in (60, 1):
        res = publisher.publish_run(run_dir, sink, storage_resolution=resolution, force=True, dashboard=False)
        assert sink.faults == [] and res.sent_now == res.batches
    sizes = [json_body_bytes("Spectrn", batch) for _, batch in sink.calls]
    assert max(sizes) < MAX_REQUEST_BYTES
    assert sum(len(b) for _, b in sink.calls[:2]) > 1000  # calls of hundreds of datums, cut by size before 1000
    assert max(len(d["Values"]) for _, b in sink.calls for d in b) == 150  # datums were split at the limit


def test_the_publisher_never_trips_a_limit_on_the_wire(tmp_path: Path, aws_env: None, moto_url: str) -> None:
    """Through botocore's real encoding (JSON, gzip above 10 kB), a checking proxy in front of moto."""
    run_dir = _recent_run(tmp_path, per_class=400, tokens=48)
    with CloudWatchDouble(upstream=moto_url) as cw:
        res = publisher.publish_run(run_dir, endpoint_url=cw.url, region=REGION)
    statuses = {s.status for s in cw.seen}
    assert statuses == {200} and len(cw.accepted) == res.batches > 1
    plan = datums.build_metric_datums(RunFolder.open(run_dir))
    assert sum(len(b["MetricData"]) for b in cw.accepted) == len(plan.datums)


# ---- a refusing sink: a clean error and a resumable ledger ------------------------------------------------------


def _sent(run_dir: Path) -> dict[str, Any]:
    (target,) = json.loads((run_dir / "publish.json").read_text())["targets"].values()
    return dict(target["sent"])


def test_a_refused_call_stops_cleanly_and_the_rerun_resumes(tmp_path: Path) -> None:
    run_dir = _recent_run(tmp_path, per_class=20)
    skewed = FakeSink(now=time.time() + 15 * 86400)  # the service's clock says the data is 15 days old
    with pytest.raises(PublishError) as err:
        publisher.publish_run(run_dir, skewed, max_datums_per_call=10)
    msg = str(err.value)
    assert "stopped at batch 1/" in msg and "Sent: 0/" in msg
    assert "InvalidParameterValue: The parameter MetricData.member.1.Timestamp must specify a time within" in msg
    assert _sent(run_dir) == {} and skewed.calls == []
    sink = FakeSink()
    res = publisher.publish_run(run_dir, sink, max_datums_per_call=10)
    assert res.already_sent == 0 and res.sent_now == res.batches == len(sink.calls)


def _batch_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def test_a_413_part_way_is_a_clean_error_and_the_rerun_sends_each_batch_once(
    tmp_path: Path, aws_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    run_dir = _recent_run(tmp_path / "a", per_class=60, tokens=32)
    with CloudWatchDouble() as measure:  # the body sizes botocore sends for these batches
        publisher.publish_run(shutil.copytree(run_dir, tmp_path / "copy"), endpoint_url=measure.url, region=REGION,
                              max_datums_per_call=40, dashboard=False)  # fmt: skip
    sizes = measure.body_sizes
    k = next(i for i in range(1, len(sizes)) if sizes[i] > max(sizes[:i]))  # the first batch bigger than all before
    with CloudWatchDouble(max_request_bytes=(max(sizes[:k]) + sizes[k]) // 2) as cw:
        argv = ["publish", str(run_dir), "--endpoint-url", cw.url, "--region", REGION, "--batch-size", "40"]
        with pytest.raises(SystemExit) as e:
            main([*argv, "--max-attempts", "1"])
        err = " ".join(capsys.readouterr().err.split())
        assert e.value.code == 6
        assert f"PublishError: publish of run run-1 to Spectrn ({REGION}@{cw.url}) stopped at batch {k + 1}/" in err
        assert f"RequestEntityTooLarge: Request size {sizes[k]} exceeded" in err and "re-run `spectrn publish" in err
        assert f"Sent: {k}/{len(sizes)} batches" in err and len(_sent(run_dir)) == k
        cw.max_request_bytes = MAX_REQUEST_BYTES
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
    keys = [_batch_key(b) for b in cw.accepted]
    assert len(keys) == len(set(keys)) == len(sizes)  # every batch accepted exactly once over both runs
    assert len(_sent(run_dir)) == len(sizes)


# ---- a 2xx that is not CloudWatch's answer ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("html", "content type text/html"),
        ("no-request-id", "no request id"),
        ("not-json", "a body that is not a json answer"),
    ],
)
def test_a_2xx_that_is_not_cloudwatchs_answer_is_not_sent(
    tmp_path: Path, aws_env: None, capsys: pytest.CaptureFixture[str], answer: str, problem: str
) -> None:
    run_dir = _recent_run(tmp_path, per_class=6)
    with CloudWatchDouble(answer=answer) as cw:
        argv = ["publish", str(run_dir), "--endpoint-url", cw.url, "--region", REGION, "--batch-size", "10"]
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert e.value.code == 6
        assert f"PutMetricData: the answer from {cw.url} is not CloudWatch's ({problem}" in err
        assert "stopped at batch 1/" in err and "Sent: 0/" in err
        assert _sent(run_dir) == {}
        cw.answer = "ok"
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        total = len(_sent(run_dir))
        assert total > 1 and len(cw.accepted) == total
        assert len({_batch_key(b) for b in cw.accepted}) == total


def test_a_dashboard_answer_that_is_not_cloudwatchs_is_an_error(tmp_path: Path, aws_env: None) -> None:
    from spectrn.publish.aws import Boto3Sink

    with CloudWatchDouble(answer="html") as cw:
        with pytest.raises(PublishError, match="PutDashboard d: the answer from .* is not CloudWatch's"):
            Boto3Sink(region=REGION, endpoint_url=cw.url).put_dashboard("d", '{"widgets": []}')


# ---- no password from the endpoint URL --------------------------------------------------------------------------


def test_an_endpoint_password_never_reaches_publish_json_or_the_terminal(
    tmp_path: Path, aws_env: None, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _recent_run(tmp_path, per_class=4)
    secret = "s3cr3t-Pa55"
    outputs = []
    with CloudWatchDouble(answer="html") as cw:
        with_password = cw.url.replace("http://", f"http://alice:{secret}@")
        for answer in ("html", "ok"):
            cw.answer = answer
            with pytest.raises(SystemExit) as e:
                main(["publish", str(run_dir), "--endpoint-url", with_password, "--region", REGION])
            out, err = capsys.readouterr()
            outputs.append(out + err)
            assert e.value.code == (6 if answer == "html" else 0)
    closed = with_password.rsplit(":", 1)[0] + ":9"  # nothing listens: botocore's error names the URL
    with pytest.raises(SystemExit) as e:
        main(["publish", str(run_dir), "--endpoint-url", closed, "--region", REGION, "--max-attempts", "1"])
    out, err = capsys.readouterr()
    outputs.append(out + err)
    assert e.value.code == 6
    state = (run_dir / "publish.json").read_text()
    for text in [*outputs, state]:
        assert secret not in text
    assert "alice:***@127.0.0.1" in state and "alice:***@" in outputs[0]


# ---- the region hint ------------------------------------------------------------------------------------------------


def test_the_region_hint_names_the_variable_boto3_reads(
    tmp_path: Path, no_aws_env: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """botocore reads AWS_DEFAULT_REGION, not AWS_REGION (configprovider.py: 'region': ('region',
    'AWS_DEFAULT_REGION', None, None)): with only AWS_REGION set there is no region, and the hint says so."""
    run_dir = _recent_run(tmp_path, per_class=2)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    for argv in (["publish", str(run_dir)], ["publish", str(run_dir), "--endpoint-url", "http://127.0.0.1:9"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = " ".join(capsys.readouterr().err.split())
        assert e.value.code == 6 and "no AWS region configured" in err
        assert "export AWS_DEFAULT_REGION (boto3 does not read AWS_REGION)" in err
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    from spectrn.publish.aws import aws_available

    assert aws_available() == (True, "eu-west-1")
