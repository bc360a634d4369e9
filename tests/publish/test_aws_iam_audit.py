"""What counts as CloudWatch's answer (each protocol's body, the content type in any case), the sink's target,
retries and dashboard notes, the credential and region checks, and the dashboard prefixes the IAM policy takes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from spectrn.errors import ConfigError
from spectrn.publish import iam
from spectrn.publish.aws import Boto3Sink, answer_problem, aws_available


def _parsed(ctype: str = "text/xml", request_id: str | None = "req-1") -> dict[str, Any]:
    meta: dict[str, Any] = {"HTTPHeaders": {"Content-Type": ctype}}
    if request_id:
        meta["RequestId"] = request_id
    return {"ResponseMetadata": meta}


@pytest.mark.parametrize(
    ("protocol", "ctype", "body"),
    [
        ("query", "text/xml", b"<PutMetricDataResponse/>"),
        ("json", "application/x-amz-json-1.0", b"{}"),
        ("rest-json", "application/json", b'{"a": 1}'),
        ("smithy-rpc-v2-cbor", "application/cbor", b"\xa0"),  # an empty map
        ("smithy-rpc-v2-cbor", "application/cbor", b"\xbf\xff"),  # an indefinite-length map
        ("query", "text", b""),  # an empty body passes (moto answers content-type: text)
    ],
    ids=["xml", "json-object", "rest-json-object", "cbor-map", "cbor-indefinite-map", "empty"],
)
def test_well_formed_answers_of_each_protocol_pass(protocol: str, ctype: str, body: bytes) -> None:
    assert answer_problem(protocol, _parsed(ctype), SimpleNamespace(content=body)) == ""


@pytest.mark.parametrize(
    ("protocol", "ctype", "body", "problem"),
    [
        ("query", "Text/HTML; charset=UTF-8", b"<p>", "content type Text/HTML; charset=UTF-8"),
        ("query", "text/xml", b"<html><body>portal</body></html>",
         "a body that is not a query answer: b'<html><body>portal</body></html>'"),
        ("json", "application/json", b"[1]", "a body that is not a json answer: b'[1]'"),
        ("json", "application/json", b"<ok/>", "a body that is not a json answer: b'<ok/>'"),
        ("smithy-rpc-v2-cbor", "application/cbor", b"\x80", "a body that is not a smithy-rpc-v2-cbor answer: b'\\x80'"),
    ],
    ids=["html-type-any-case", "html-body", "json-array", "json-xml", "cbor-array"],
)  # fmt: skip
def test_answers_that_are_not_cloudwatchs_are_named(protocol: str, ctype: str, body: bytes, problem: str) -> None:
    assert answer_problem(protocol, _parsed(ctype), SimpleNamespace(content=body)) == problem


def test_a_missing_request_id_is_named_with_the_other_problems() -> None:
    got = answer_problem("query", _parsed("text/html", request_id=None), None)
    assert got == "content type text/html; no request id"


def test_the_sink_names_its_target_retries_and_reads_dashboard_notes(aws_env: None) -> None:
    sink = Boto3Sink(region="eu-west-1", endpoint_url="http://bob:pw@127.0.0.1:9", max_attempts=5)
    assert (sink.region, sink.target) == ("eu-west-1", "eu-west-1@http://bob:***@127.0.0.1:9")
    assert sink._client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 5}
    notes = {"DashboardValidationMessages": [{"DataPath": "/widgets/1", "Message": "bad stat"}, {"Message": "x"}]}
    sink._call = lambda *a, **k: notes  # type: ignore[method-assign]
    assert sink.put_dashboard("d", "{}") == ["/widgets/1: bad stat", ": x"]


def test_credentials_without_a_region_are_not_enough(no_aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert aws_available() == (
        False, "no AWS credentials found (environment, shared config/credentials files, SSO, IRSA, IMDS)"
    )  # fmt: skip
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert aws_available() == (
        False, "no AWS region configured (--region, cloudwatch.region, AWS_DEFAULT_REGION or the AWS profile)"
    )  # fmt: skip
    assert aws_available("ap-south-1") == (True, "ap-south-1")


@pytest.mark.parametrize("prefix", ["team.x", "a/b", "sp ectrn", ""], ids=["dot", "slash", "space", "empty"])
def test_dashboard_prefixes_the_policy_refuses(prefix: str) -> None:
    """Dashboard names hold only letters, digits, '-' and '_': a prefix with anything else matches no dashboard."""
    with pytest.raises(ConfigError, match="may hold only letters, digits, '-' and '_'"):
        iam.publish_iam_policy("Spectrn", prefix)


def test_the_default_policy_in_full() -> None:
    assert iam.publish_iam_policy("Team/Bench", "bench_1") == {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "SpectrnPutMetricData", "Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*",
             "Condition": {"StringEquals": {"cloudwatch:namespace": "Team/Bench"}}},
            {"Sid": "SpectrnDashboards", "Effect": "Allow",
             "Action": ["cloudwatch:PutDashboard", "cloudwatch:GetDashboard"],
             "Resource": "arn:aws:cloudwatch::*:dashboard/bench_1-*"},
        ],
    }  # fmt: skip
