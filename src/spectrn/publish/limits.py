"""CloudWatch's service-side limits (docs/cloudwatch.md cites each) and the checks that enforce them before a call."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from spectrn.errors import ConfigError, PublishError
from spectrn.labels import iso_utc

MAX_VALUES_PER_DATUM = 150


MAX_DATUMS_PER_CALL = 1000


MAX_REQUEST_BYTES = 1_000_000


# Our size estimate is the query-protocol encoding (the most verbose wire form botocore can pick); keep a
# margin for the request line and form headers.
REQUEST_BYTES_BUDGET = 950_000


MAX_DIMENSIONS = 30


MAX_PAST_S = 14 * 24 * 3600


MAX_FUTURE_S = 2 * 3600


# Leave time for the publish itself: a datum 13d23h59m old when planned may be older than 14 days when sent.
PAST_MARGIN_S = 15 * 60


MAX_WIDGETS = 500


MAX_METRICS_PER_WIDGET = 500


# CloudWatch rejects magnitudes outside roughly 8.5e-109 .. 1.17e+108 (and NaN/Inf).
MIN_ABS_VALUE = 1e-100


MAX_ABS_VALUE = 1e100


EMF_MAX_VALUES = 100


UNITS = {"Seconds", "Count", "Count/Second", "Percent", "None"}


def validate_namespace(namespace: str) -> None:
    if not namespace or len(namespace) > 255:
        raise ConfigError(f"CloudWatch namespace {namespace!r} must be 1..255 characters", hint="e.g. Spectrn")
    if namespace.startswith("AWS/"):
        raise ConfigError(
            f"CloudWatch namespace {namespace!r} starts with 'AWS/', which is reserved for AWS services",
            hint="use your own namespace, e.g. Spectrn",
        )
    if not re.fullmatch(r"[A-Za-z0-9_./#:\- ]+", namespace):
        raise ConfigError(
            f"CloudWatch namespace {namespace!r} has characters outside letters, digits and . - _ / # : space",
            hint="e.g. Spectrn or MyTeam/Spectrn",
        )


def validate_datum(d: dict[str, Any]) -> None:
    """Check one datum against every PutMetricData limit; raises ``PublishError`` (a bug guard before send)."""
    name = d.get("MetricName", "?")
    values, counts = d.get("Values", []), d.get("Counts", [])
    problems = []
    if not 1 <= len(values) <= MAX_VALUES_PER_DATUM:
        problems.append(f"{len(values)} values (allowed 1..{MAX_VALUES_PER_DATUM})")
    if len(counts) != len(values):
        problems.append(f"{len(counts)} counts for {len(values)} values")
    if len(d.get("Dimensions", [])) > MAX_DIMENSIONS:
        problems.append(f"{len(d['Dimensions'])} dimensions (max {MAX_DIMENSIONS})")
    for dim in d.get("Dimensions", []):
        if not dim.get("Value") or not dim.get("Name"):
            problems.append(f"empty dimension {dim}")
    for v in [*values, *counts]:
        if not math.isfinite(v) or (v != 0 and not MIN_ABS_VALUE <= abs(v) <= MAX_ABS_VALUE):
            problems.append(f"value {v} outside CloudWatch's range")
            break
    if d.get("Unit") not in UNITS:
        problems.append(f"unit {d.get('Unit')!r}")
    if d.get("StorageResolution") not in (1, 60):
        problems.append(f"StorageResolution {d.get('StorageResolution')!r}")
    if problems:
        raise PublishError(f"metric datum {name} breaks PutMetricData limits: {', '.join(problems)}")


def check_timestamps(datums: Sequence[dict[str, Any]], now: float, *, run_id: str = "") -> None:
    """CloudWatch accepts timestamps up to 14 days back and 2 hours ahead; say which side and how to fix it."""
    if not datums:
        return
    stamps = [d["Timestamp"].timestamp() for d in datums]
    oldest, newest = min(stamps), max(stamps)
    age_days = (now - oldest) / 86400
    if now - oldest > MAX_PAST_S - PAST_MARGIN_S:
        raise PublishError(
            f"run {run_id} has data from {_iso(oldest)}, {age_days:.1f} days ago; CloudWatch accepts "
            f"timestamps at most 14 days old",
            hint="pass --retime to publish the same distributions with timestamps shifted so the run ends now "
            "(requests.jsonl keeps the original times; the shift is recorded in publish.json)",
        )
    if newest - now > MAX_FUTURE_S:
        raise PublishError(
            f"run {run_id} has data at {_iso(newest)}, {(newest - now) / 3600:.1f} h in the future; CloudWatch "
            "accepts timestamps at most 2 hours ahead",
            hint="check this machine's clock (and the clock of the machine that ran the bench), or pass --retime",
        )


def _iso(ts: float) -> str:
    return iso_utc(ts)


def estimate_request_bytes(datum: dict[str, Any], member_index: int = 1000) -> int:
    """Upper bound of one datum's bytes in a query-protocol PutMetricData body (the most verbose encoding)."""
    p = f"MetricData.member.{member_index}."
    n = len(p) + len("MetricName=&") + len(quote(datum["MetricName"], safe=""))
    for j, dim in enumerate(datum.get("Dimensions", []), 1):
        dp = f"{p}Dimensions.member.{j}."
        n += 2 * len(dp) + len("Name=&Value=&")
        n += len(quote(dim["Name"], safe="")) + len(quote(dim["Value"], safe=""))
    n += len(p) + len("Timestamp=&") + len("2026-01-01T00%3A00%3A00.000000Z")
    n += len(p) + len("Unit=&") + len(quote(datum["Unit"], safe=""))
    n += len(p) + len("StorageResolution=&") + 2
    for k, (v, c) in enumerate(zip(datum["Values"], datum["Counts"], strict=True), 1):
        n += len(f"{p}Values.member.{k}=&") + len(repr(float(v)))
        n += len(f"{p}Counts.member.{k}=&") + len(repr(float(c)))
    return n
