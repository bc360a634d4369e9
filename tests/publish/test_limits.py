"""CloudWatch's limits as spectrn checks them (spectrn.publish.limits): every message, every boundary, and the
request-size estimate against botocore's own query serialisation."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest

from spectrn.errors import ConfigError, PublishError
from spectrn.publish import limits

# ---- namespace ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ns", ["S", "a" * 255, "MyTeam/Spectrn-1.0_x#y:z w", "AWSome/Bench"]
)  # only "AWS/" is reserved
def test_namespaces_cloudwatch_takes(ns: str) -> None:
    limits.validate_namespace(ns)


@pytest.mark.parametrize(
    ("ns", "message", "hint"),
    [
        ("", "CloudWatch namespace '' must be 1..255 characters", "e.g. Spectrn"),
        ("a" * 256, f"CloudWatch namespace {'a' * 256!r} must be 1..255 characters", "e.g. Spectrn"),
        (
            "AWS/EC2",
            "CloudWatch namespace 'AWS/EC2' starts with 'AWS/', which is reserved for AWS services",
            "use your own namespace, e.g. Spectrn",
        ),
        (
            "Spectrn!",
            "CloudWatch namespace 'Spectrn!' has characters outside letters, digits and . - _ / # : space",
            "e.g. Spectrn or MyTeam/Spectrn",
        ),
    ],
)
def test_namespaces_refused_with_the_fix(ns: str, message: str, hint: str) -> None:
    with pytest.raises(ConfigError) as e:
        limits.validate_namespace(ns)
    assert (e.value.message, e.value.hint) == (message, hint)


# ---- one datum ------------------------------------------------------------------------------------------


def datum(**kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "MetricName": "TTFT",
        "Dimensions": [{"Name": "RunId", "Value": "r"}],
        "Timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "Values": [0.1],
        "Counts": [1.0],
        "Unit": "Seconds",
        "StorageResolution": 60,
    }
    d.update(kw)
    return d


@pytest.mark.parametrize(
    "kw",
    [
        {"Values": [float(i) for i in range(150)], "Counts": [1.0] * 150},
        {"Dimensions": [{"Name": f"D{i}", "Value": "v"} for i in range(30)]},
        {"Values": [1e-100, -1e100, 0.0], "Counts": [1.0, 1e100, 1.0]},
        {"StorageResolution": 1},
        {"Unit": "Count/Second"},
        {"Dimensions": []},
    ],
    ids=["150-values", "30-dimensions", "range-edges", "high-resolution", "unit", "no-dimensions"],
)
def test_datums_at_the_limits_pass(kw: dict[str, Any]) -> None:
    limits.validate_datum(datum(**kw))


@pytest.mark.parametrize(
    ("kw", "problems"),
    [
        ({"Values": [float(i) for i in range(151)], "Counts": [1.0] * 151}, "151 values (allowed 1..150)"),
        ({"Values": [], "Counts": []}, "0 values (allowed 1..150)"),
        ({"Counts": [1.0, 2.0]}, "2 counts for 1 values"),
        ({"Dimensions": [{"Name": f"D{i}", "Value": "v"} for i in range(31)]}, "31 dimensions (max 30)"),
        ({"Dimensions": [{"Name": "RunId", "Value": ""}]}, "empty dimension {'Name': 'RunId', 'Value': ''}"),
        ({"Dimensions": [{"Name": "", "Value": "x"}]}, "empty dimension {'Name': '', 'Value': 'x'}"),
        ({"Values": [1e-101, 2e101]}, "1 counts for 2 values, value 1e-101 outside CloudWatch's range"),
        ({"Values": [1.5e100]}, "value 1.5e+100 outside CloudWatch's range"),
        ({"Counts": [float("inf")]}, "value inf outside CloudWatch's range"),
        ({"Unit": "Parsecs"}, "unit 'Parsecs'"),
        ({"StorageResolution": 2}, "StorageResolution 2"),
        ({"Unit": None, "StorageResolution": None}, "unit None, StorageResolution None"),
    ],
)
def test_each_broken_limit_is_named(kw: dict[str, Any], problems: str) -> None:
    with pytest.raises(PublishError) as e:
        limits.validate_datum(datum(**kw))
    assert e.value.message == f"metric datum TTFT breaks PutMetricData limits: {problems}"


def test_a_datum_missing_everything_is_named_as_such() -> None:
    with pytest.raises(PublishError) as e:
        limits.validate_datum({})
    assert e.value.message == (
        "metric datum ? breaks PutMetricData limits: 0 values (allowed 1..150), unit None, StorageResolution None"
    )


# ---- timestamps ---------------------------------------------------------------------------------------

NOW = 1_790_000_000.0


def stamped(*offsets: float) -> list[dict[str, Any]]:
    return [datum(Timestamp=datetime.fromtimestamp(NOW + o, tz=UTC)) for o in offsets]


def test_timestamps_at_the_edges_of_the_window_pass() -> None:
    oldest = -(limits.MAX_PAST_S - limits.PAST_MARGIN_S)
    limits.check_timestamps(stamped(oldest, 0.0, limits.MAX_FUTURE_S), NOW, run_id="r")
    limits.check_timestamps([], NOW)


def test_too_old_names_the_date_the_age_and_the_fix() -> None:
    age = limits.MAX_PAST_S - limits.PAST_MARGIN_S + 1
    with pytest.raises(PublishError) as e:
        limits.check_timestamps(stamped(-age, 0.0), NOW, run_id="run-1")
    oldest = datetime.fromtimestamp(NOW - age, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert e.value.message == (
        f"run run-1 has data from {oldest}, {age / 86400:.1f} days ago; CloudWatch accepts timestamps at most 14 "
        "days old"
    )
    assert f"{age / 86400:.1f}" == "14.0"
    assert e.value.hint == (
        "pass --retime to publish the same distributions with timestamps shifted so the run ends now "
        "(requests.jsonl keeps the original times; the shift is recorded in publish.json)"
    )


def test_too_far_ahead_names_the_date_the_hours_and_the_fix() -> None:
    with pytest.raises(PublishError) as e:
        limits.check_timestamps(stamped(0.0, 3 * 3600), NOW)
    newest = datetime.fromtimestamp(NOW + 3 * 3600, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert e.value.message == (
        f"run  has data at {newest}, 3.0 h in the future; CloudWatch accepts timestamps at most 2 hours ahead"
    )
    assert e.value.hint == (
        "check this machine's clock (and the clock of the machine that ran the bench), or pass --retime"
    )
    with pytest.raises(PublishError, match="2.0 h in the future"):
        limits.check_timestamps(stamped(limits.MAX_FUTURE_S + 1), NOW)


def test_iso_dates_are_utc() -> None:
    assert limits._iso(0.0) == "1970-01-01T00:00:00Z"
    assert limits._iso(1_790_000_123.9) == "2026-09-21T14:15:23Z"
    assert limits._iso(1_790_000_123.9) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_790_000_123))


# ---- request size -----------------------------------------------------------------------------------


def _member_bytes(d: dict[str, Any]) -> int:
    """What one datum adds, as member 1000, to the query-protocol body botocore sends (the '&' before it too)."""
    import botocore.session
    from botocore.serialize import create_serializer

    op = botocore.session.get_session().get_service_model("cloudwatch").operation_model("PutMetricData")
    ser = create_serializer("query")
    filler = [datum(MetricName="X", Dimensions=[])] * 999

    def size(ds: list[dict[str, Any]]) -> int:
        body = ser.serialize_to_request({"Namespace": "Spectrn", "MetricData": ds}, op)["body"]
        return len(urlencode(body).encode())

    return size([*filler, d]) - size(filler)


@pytest.mark.parametrize(
    "d",
    [
        datum(
            Dimensions=[{"Name": "RunId", "Value": "run 1/a"}, {"Name": "Load", "Value": "c4"}],
            Timestamp=datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC),
            Values=[0.01534, 12.5, 3.0],
            Counts=[1.0, 2.0, 10.0],
            Unit="Count/Second",
        ),
        datum(
            MetricName="E2E Latency",
            Dimensions=[{"Name": f"D{i}", "Value": f"v&{i}"} for i in range(12)],
            Timestamp=datetime(2026, 3, 4, 5, 6, 7, 500000, tzinfo=UTC),
            Values=[i / 7 for i in range(150)],
            Counts=[1.0] * 150,
            Unit="None",
        ),
    ],
    ids=["small", "large"],
)
def test_the_size_estimate_is_two_bytes_over_the_real_body(d: dict[str, Any]) -> None:
    """Measured against botocore's own serialisation: exactly 2 bytes over for a datum with a sub-second timestamp,
    whatever its size, so the estimate is an upper bound that is never loose and any change to it shows."""
    assert limits.estimate_request_bytes(d) - _member_bytes(d) == 2


def test_the_size_estimate_of_a_whole_second_timestamp_is_seven_bytes_over() -> None:
    d = datum(Timestamp=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))  # botocore writes no fraction of a second
    assert limits.estimate_request_bytes(d) - _member_bytes(d) == 7


def test_the_size_estimate_grows_with_the_member_index_width() -> None:
    d = datum()
    keys = 2 * 1 + 4 + 2 * 1  # the dimension's Name and Value, MetricName, Timestamp, Unit, StorageResolution, 1 value
    assert limits.estimate_request_bytes(d, 1) == limits.estimate_request_bytes(d, 1000) - 3 * keys


def test_ages_are_shown_to_a_tenth_of_a_day_and_an_hour() -> None:
    """14.0501 days shows as 14.1 and 3.0501 h as 3.1: exact day and hour lengths (86400 s, 3600 s)."""
    with pytest.raises(PublishError, match=r", 14\.1 days ago;"):
        limits.check_timestamps(stamped(-14.0501 * 86400), NOW, run_id="r")
    with pytest.raises(PublishError, match=r", 3\.1 h in the future;"):
        limits.check_timestamps(stamped(3.0501 * 3600), NOW, run_id="r")


def test_iso_dates_are_utc_in_any_local_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        assert limits._iso(0.0) == "1970-01-01T00:00:00Z"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_datum_without_dimensions_is_estimated() -> None:
    d = datum()
    del d["Dimensions"]
    with_none = datum(Dimensions=[])
    assert limits.estimate_request_bytes(d) == limits.estimate_request_bytes(with_none) > 0
