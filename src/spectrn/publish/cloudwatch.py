"""CloudWatch: per-request metric distributions, the comparison dashboard, EMF lines, the IAM policy.

The only module that imports ``boto3`` (inside ``Boto3Sink``). Everything else here is pure:

    run folder --load_run--> RunData --build_metric_datums--> datums --batch_datums--> batches
                                     --build_dashboard-------> dashboard body --validate_dashboard
                                     --emf_lines-------------> metrics.emf.jsonl

``publish_run`` drives a ``MetricsSink`` (boto3, or a fake in tests) through the batches and records
progress in ``results/<run-id>/publish.json`` so that a publish which failed part-way can be re-run and
sends only what CloudWatch has not accepted yet (CloudWatch cannot delete datapoints, so a blind re-send
would double count).

Raw values, never summaries: each request contributes its own TTFT, TPOT, e2e, throughput and every
per-token ITL gap through ``Values`` + ``Counts``, so CloudWatch computes true percentiles. Values are
rounded to ``sig_digits`` significant digits (default 4, at most 0.05 % relative error) so that repeats
collapse into one value with a count; a datum never carries more than 150 distinct values.

Dimensions (see docs/cloudwatch.md): ``RunId``, ``Config`` (``<draft>/k<window>``, the A/B pair's
identity), ``Load`` (``c4``, ``r2.0``), ``Variant``, and ``PromptClass``; every value is published
twice, once with and once without ``PromptClass`` (the aggregate over all prompt classes).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from spectrn.errors import AnalysisError, ConfigError, PublishError, one_line
from spectrn.run.records import RequestRecord, RunMeta, read_records

# ---- CloudWatch limits (REFERENCE section 6) ----------------------------------------------------------
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
STATE_FILE = "publish.json"
EMF_FILE = "metrics.emf.jsonl"
STATE_VERSION = 1

# Dimension names, outermost first; PromptClass is dropped for the aggregate dimension set.
DIMS_AGGREGATE = ("RunId", "Config", "Load", "Variant")
DIMS_BY_CLASS = (*DIMS_AGGREGATE, "PromptClass")
ALL_CLASSES = "all"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    per_request: bool
    description: str


METRICS: dict[str, MetricSpec] = {
    m.name: m
    for m in (
        MetricSpec("TTFT", "Seconds", True, "time from send to the first token, one value per request"),
        MetricSpec("TPOT", "Seconds", True, "(e2e - TTFT) / (output tokens - 1), one value per request"),
        MetricSpec("ITL", "Seconds", True, "every per-token gap of every request (multi-token chunks split)"),
        MetricSpec("E2ELatency", "Seconds", True, "time from send to the last byte, one value per request"),
        MetricSpec("OutputThroughput", "Count/Second", True, "output tokens per second of one request"),
        MetricSpec("OutputTokens", "Count", True, "output tokens of one request"),
        MetricSpec("TokensPerChunk", "None", True, "mean tokens per decode chunk (after the first) of a request"),
        MetricSpec("Errors", "Count", True, "1 per failed request, 0 per completed one (Sum = errors)"),
        MetricSpec("AcceptanceRate", "Percent", False, "accepted / drafted tokens over the run (server counters)"),
        MetricSpec("MeanAcceptanceLength", "None", False, "1 + accepted / drafts over the run (server counters)"),
    )
}


class RequestMetricsLike(Protocol):
    """What ``spectrn.analyze.summary.request_metrics`` returns (only the fields published here)."""

    ttft: float | None
    tpot: float | None
    e2e: float | None
    itls: list[float]
    output_tokens: int
    throughput_tok_s: float | None


MetricsFn = Callable[[RequestRecord], RequestMetricsLike | None]


def default_metrics_fn() -> MetricsFn:
    try:
        from spectrn.analyze.summary import request_metrics
    except ImportError as e:  # pragma: no cover - only without the analyze stage installed
        raise AnalysisError(
            f"per-request metrics are unavailable: {e}", hint="install spectrn completely (spectrn.analyze.summary)"
        ) from None
    return request_metrics  # type: ignore[return-value]


# ---- the run folder ------------------------------------------------------------------------------------


@dataclass
class RunData:
    """A run folder read back: metadata, measured (non-warm-up) records, summary and acceptance."""

    run_dir: Path
    meta: RunMeta
    records: list[RequestRecord]
    summary: dict[str, Any] | None
    acceptance: dict[str, Any]

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.meta.config)

    @property
    def config_label(self) -> str:
        return config_label(self.config)

    @property
    def prompt_classes(self) -> list[str]:
        return sorted({_dim_value(r.prompt_class) for r in self.records})

    @property
    def levels(self) -> list[str]:
        return _sorted_levels({_dim_value(r.level) for r in self.records})

    @property
    def variants(self) -> list[str]:
        order = {"baseline": 0, "speculative": 1}
        return sorted({r.variant for r in self.records}, key=lambda v: (order.get(v, 2), v))

    def acceptance_for(self, variant: str, level: str) -> dict[str, Any] | None:
        """Acceptance of one variant at one load level: ``acceptance.json`` (keys ``variant@level`` or
        ``variant``, as analyze reads them), else the summary's ``acceptance`` of that variant."""
        value = self.acceptance.get(f"{variant}@{level}", self.acceptance.get(variant))
        if isinstance(value, dict):
            return value
        s = self.summary or {}
        lv = (s.get("levels") or {}).get(level) if isinstance(s.get("levels"), dict) else None
        if lv is None and s.get("level", level) == level:
            lv = s
        acc = ((lv or {}).get("variants") or {}).get(variant, {}) if isinstance(lv, dict) else {}
        acc = acc.get("acceptance") if isinstance(acc, dict) else None
        return acc if isinstance(acc, dict) else None

    @property
    def has_acceptance(self) -> bool:
        return any(self.acceptance_for(v, lv) for v in self.variants for lv in self.levels)

    def time_range(self) -> tuple[float, float]:
        """(first send, last completion) in Unix seconds; falls back to run.json's start/end."""
        if not self.records:
            return self.meta.started_at, self.meta.finished_at or self.meta.started_at
        start = min(r.sent_at for r in self.records)
        end = max(r.sent_at + (r.e2e if r.e2e is not None and math.isfinite(r.e2e) else 0.0) for r in self.records)
        return start, end


def config_section(config: Any, key: str) -> dict[str, Any]:
    """``config[key]`` when it is a mapping (run.json holds the config dump), else an empty one."""
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, dict) else {}


def config_label(config: dict[str, Any]) -> str:
    """``<draft>/k<window>`` (``medusa/k<window>`` for Medusa): one value naming the speculative setup."""
    window = config.get("num_speculative_tokens")
    draft = "medusa" if config.get("speculation_mode") == "medusa" else config.get("draft")
    if draft is None and window is None:
        return "default"
    return f"{draft or 'draft'}/k{window if window is not None else '?'}"


def _dim_value(v: str | None) -> str:
    v = (v or "").strip()
    return v[:1024] if v else "unknown"


def _sorted_levels(levels: Iterable[str]) -> list[str]:
    def key(level: str) -> tuple[str, float, str]:
        m = re.fullmatch(r"([a-z]+)([0-9.]+)", level)
        if m:
            try:
                return (m.group(1), float(m.group(2)), level)
            except ValueError:
                pass
        return ("~", 0.0, level)

    return sorted(set(levels), key=key)


def load_run(run_dir: Path) -> RunData:
    """Read ``run.json``, ``requests.jsonl`` and, when present, ``summary.json`` and ``acceptance.json``."""
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise AnalysisError(f"run folder {run_dir} does not exist", hint="pass a folder such as results/<run-id>")
    if not meta_path.exists():
        raise AnalysisError(f"{meta_path} is missing", hint="pass a run folder written by `spectrn bench`")
    try:
        meta = RunMeta.model_validate_json(meta_path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise AnalysisError(
            f"{meta_path} is not valid run metadata: {one_line(e)}", hint="restore run.json, or re-run the bench"
        ) from None
    records = [r for r in read_records(run_dir / "requests.jsonl") if not r.warmup]
    summary = _read_json(run_dir / "summary.json")
    acceptance = _acceptance(_read_json(run_dir / "acceptance.json"))
    return RunData(run_dir, meta, records, summary, acceptance)


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise AnalysisError(f"{path} is not valid JSON: {e}", hint="re-run `spectrn analyze` or remove it") from None


def _acceptance(raw: Any) -> dict[str, Any]:
    """``acceptance.json`` as written by loadgen: {variant or "variant@level": {...} | null}."""
    if isinstance(raw, dict) and isinstance(raw.get("variants"), dict):
        raw = raw["variants"]
    return dict(raw) if isinstance(raw, dict) else {}


# ---- values -> datums ------------------------------------------------------------------------------------


@dataclass
class DatumPlan:
    """The metric datums of one run, in a deterministic order, and what was left out."""

    namespace: str
    run_id: str
    datums: list[dict[str, Any]]
    samples: int
    nonfinite_dropped: list[str] = field(default_factory=list)
    time_shift_s: float = 0.0
    start: float = 0.0
    end: float = 0.0


def round_sig(values: Sequence[float], sig_digits: int) -> tuple[list[float], list[float]]:
    """Round to ``sig_digits`` significant digits and collapse repeats: (sorted distinct values, counts).

    Exact decimal results (``0.01534``, not ``0.015339999``) keep the request small.
    """
    import numpy as np

    if not values:
        return [], []
    arr = np.asarray(values, dtype=float)
    zero = np.abs(arr) < MIN_ABS_VALUE
    nz = arr[~zero]
    keys: list[tuple[int, int]] = []
    counts: list[int] = []
    if nz.size:
        exp = np.floor(np.log10(np.abs(nz))).astype(np.int64)
        shift = exp - (sig_digits - 1)
        mant = np.rint(nz / np.power(10.0, shift)).astype(np.int64)
        # 9.9996 rounds to mantissa 10000 at exponent 0: renormalise so it equals 10.00 at exponent 1.
        over = np.abs(mant) >= 10**sig_digits
        mant = np.where(over, mant // 10, mant)
        shift = np.where(over, shift + 1, shift)
        pairs = np.stack([shift, mant], axis=1)
        uniq, cnt = np.unique(pairs, axis=0, return_counts=True)
        keys = [(int(s), int(m)) for s, m in uniq]
        counts = [int(c) for c in cnt]
    decoded: dict[float, int] = {}
    for (s, m), c in zip(keys, counts, strict=True):
        v = float(f"{m}e{s}")
        decoded[v] = decoded.get(v, 0) + c
    n_zero = int(zero.sum())
    if n_zero:
        decoded[0.0] = decoded.get(0.0, 0) + n_zero
    ordered = sorted(decoded)
    return ordered, [float(decoded[v]) for v in ordered]


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def build_metric_datums(
    run: RunData,
    *,
    namespace: str = "Spectrn",
    run_id: str | None = None,
    storage_resolution: int = 60,
    bucket_s: int = 60,
    sig_digits: int = 4,
    time_shift_s: float = 0.0,
    skip_nonfinite: bool = False,
    metrics_fn: MetricsFn | None = None,
) -> DatumPlan:
    """Turn the run's records into PutMetricData datums (pure; deterministic order).

    Values are grouped per (metric, dimensions, ``bucket_s`` window of send times); each group's timestamp
    is the window start (plus ``time_shift_s``). NaN or infinite values raise ``PublishError`` naming the
    requests, unless ``skip_nonfinite`` (then they are dropped and listed in ``nonfinite_dropped``).
    """
    validate_namespace(namespace)
    if storage_resolution not in (1, 60):
        raise ConfigError(
            f"cloudwatch.storage_resolution={storage_resolution} is not allowed",
            hint="use 1 (high resolution) or 60 (standard)",
        )
    if bucket_s < 1:
        raise ConfigError(f"bucket_s={bucket_s} must be at least 1 second", hint="use 60 (one minute)")
    if not 1 <= sig_digits <= 6:
        raise ConfigError(f"sig_digits={sig_digits} must be within 1..6", hint="use 4")
    metrics_fn = metrics_fn or default_metrics_fn()
    rid = _dim_value(run_id or run.run_id)
    cfg = _dim_value(run.config_label)

    # (variant, level, class, bucket) -> metric -> values
    groups: dict[tuple[str, str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    bad: list[str] = []
    for rec in run.records:
        bucket = int(math.floor(rec.sent_at / bucket_s) * bucket_s)
        key = (_dim_value(rec.variant), _dim_value(rec.level), _dim_value(rec.prompt_class), bucket)
        g = groups[key]
        if not rec.ok:
            g["Errors"].append(1.0)
            continue
        g["Errors"].append(0.0)
        rm = metrics_fn(rec)
        if rm is None:
            continue
        where = f"{rec.variant} request {rec.index} ({rec.prompt_id})"
        for name, value in (
            ("TTFT", rm.ttft),
            ("TPOT", rm.tpot),
            ("E2ELatency", rm.e2e),
            ("OutputThroughput", rm.throughput_tok_s),
            ("OutputTokens", float(rm.output_tokens) if rm.output_tokens is not None else None),
        ):
            if value is None:
                continue
            if not math.isfinite(value):
                bad.append(f"{name} of {where} is {value}")
                continue
            g[name].append(float(value))
        tpc = getattr(rm, "tokens_per_decode_chunk", None)
        if tpc is not None and math.isfinite(tpc):
            g["TokensPerChunk"].append(float(tpc))
        itls = rm.itls or []
        if itls:
            if math.isfinite(sum(itls)):  # NaN and +-Inf all make the sum non-finite
                g["ITL"].extend(itls)
            else:
                finite = [x for x in itls if math.isfinite(x)]
                bad.append(f"ITL of {where} has {len(itls) - len(finite)} non-finite gaps")
                g["ITL"].extend(finite)

    accept_ts = int(math.floor(run.time_range()[1] / bucket_s) * bucket_s)
    if bad and not skip_nonfinite:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise PublishError(
            f"run {run.run_id}: {len(bad)} non-finite value(s) (NaN/Inf), which CloudWatch rejects: {shown}",
            hint="fix the records (re-run `spectrn analyze` or the bench), or pass --skip-nonfinite to drop "
            "those values; dropped values are listed in publish.json",
        )

    # Aggregate dimension set: the union over prompt classes.
    series: dict[tuple[str, tuple[tuple[str, str], ...], int], list[float]] = defaultdict(list)
    for (variant, level, pclass, bucket), metrics in groups.items():
        base = (("RunId", rid), ("Config", cfg), ("Load", level), ("Variant", variant))
        for name, values in metrics.items():
            series[(name, (*base, ("PromptClass", pclass)), bucket)].extend(values)
            series[(name, base, bucket)].extend(values)
    for level in run.levels:
        for variant in run.variants:
            acc = run.acceptance_for(variant, level)
            if not acc:
                continue
            base = (("RunId", rid), ("Config", cfg), ("Load", level), ("Variant", _dim_value(variant)))
            rate, length = acc.get("rate"), acc.get("mean_accepted_length")
            if isinstance(rate, int | float):
                if math.isfinite(rate):
                    series[("AcceptanceRate", base, accept_ts)].append(100.0 * float(rate))
                else:
                    bad.append(f"AcceptanceRate of {variant} is {rate}")
            if isinstance(length, int | float):
                if math.isfinite(length):
                    series[("MeanAcceptanceLength", base, accept_ts)].append(float(length))
                else:
                    bad.append(f"MeanAcceptanceLength of {variant} is {length}")
    if bad and not skip_nonfinite:
        raise PublishError(
            f"run {run.run_id}: non-finite acceptance value(s): {'; '.join(bad[:5])}",
            hint="fix acceptance.json, or pass --skip-nonfinite to drop those values",
        )

    datums: list[dict[str, Any]] = []
    samples = 0
    for name, dims, bucket in sorted(series):
        spec = METRICS[name]
        values, counts = round_sig(series[(name, dims, bucket)], sig_digits)
        samples += int(sum(counts))
        ts = datetime.fromtimestamp(bucket + time_shift_s, tz=UTC)
        for i in range(0, len(values), MAX_VALUES_PER_DATUM):
            datums.append(
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
                    "Timestamp": ts,
                    "Values": values[i : i + MAX_VALUES_PER_DATUM],
                    "Counts": counts[i : i + MAX_VALUES_PER_DATUM],
                    "Unit": spec.unit,
                    "StorageResolution": storage_resolution,
                }
            )
    start, end = run.time_range()
    return DatumPlan(namespace, rid, datums, samples, bad, time_shift_s, start + time_shift_s, end + time_shift_s)


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
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def batch_datums(
    datums: Sequence[dict[str, Any]],
    *,
    max_datums: int = MAX_DATUMS_PER_CALL,
    max_bytes: int = REQUEST_BYTES_BUDGET,
    namespace: str = "Spectrn",
) -> list[list[dict[str, Any]]]:
    """Greedy, order-preserving split into calls of at most ``max_datums`` datums and ``max_bytes`` bytes."""
    header = len("Action=PutMetricData&Version=2010-08-01&Namespace=") + len(quote(namespace, safe=""))
    batches: list[list[dict[str, Any]]] = []
    cur: list[dict[str, Any]] = []
    size = header
    for d in datums:
        validate_datum(d)
        n = estimate_request_bytes(d)
        if header + n > max_bytes:
            raise PublishError(f"one {d['MetricName']} datum alone is {n} bytes, over the request budget")
        if cur and (len(cur) >= max_datums or size + n > max_bytes):
            batches.append(cur)
            cur, size = [], header
        cur.append(d)
        size += n
    if cur:
        batches.append(cur)
    return batches


def _canonical(d: dict[str, Any]) -> dict[str, Any]:
    out = dict(d)
    out["Timestamp"] = int(d["Timestamp"].timestamp())
    return out


def batch_hash(batch: Sequence[dict[str, Any]], namespace: str) -> str:
    """Content hash of one PutMetricData call (namespace + datums), the unit of idempotent re-publish."""
    payload = json.dumps([namespace, [_canonical(d) for d in batch]], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


# ---- dashboards ------------------------------------------------------------------------------------------

VARIANT_COLORS = {"baseline": "#1f77b4", "speculative": "#ff7f0e"}
_PALETTE = ["#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
_STAT_RE = re.compile(r"^(SampleCount|Average|Sum|Minimum|Maximum|IQM|p\d{1,2}(\.\d+)?|p100|(tm|wm|tc|ts|pr)\d{1,2})$")
_WIDGET_TYPES = {"metric", "text", "log", "alarm", "explorer"}
_VIEWS = {"timeSeries", "singleValue", "bar", "pie", "table", "gauge"}
_METRIC_OPTS = {"stat", "label", "color", "period", "yAxis", "id", "visible", "region", "accountId", "unit"}


@dataclass
class DashboardRun:
    """One (run id, config) pair a dashboard shows; a sweep passes several with the same run id."""

    run_id: str
    config_label: str
    levels: list[str]
    prompt_classes: list[str]
    variants: list[str]
    start: float
    end: float
    has_acceptance: bool = False
    markdown: str = ""


def dashboard_name(prefix: str, run_id: str) -> str:
    """``<prefix>-<run id>`` with anything but letters, digits, '-' and '_' replaced (CloudWatch's rule)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "-", f"{prefix}-{run_id}")
    return name[:255]


def dashboard_run(run: RunData, *, run_id: str | None = None, time_shift_s: float = 0.0) -> DashboardRun:
    start, end = run.time_range()
    return DashboardRun(
        run_id=_dim_value(run_id or run.run_id),
        config_label=_dim_value(run.config_label),
        levels=run.levels or ["unknown"],
        prompt_classes=run.prompt_classes,
        variants=run.variants or ["baseline", "speculative"],
        start=start + time_shift_s,
        end=end + time_shift_s,
        has_acceptance=run.has_acceptance,
        markdown=run_markdown(run),
    )


def run_markdown(run: RunData) -> str:
    """The dashboard's text widget: what ran and the speedups analyze measured."""
    c = run.config
    bench = config_section(c, "bench")
    lines = [
        f"# spectrn run {run.run_id}",
        f"target **{c.get('target', '?')}**, draft **{c.get('draft', '?')}**, window "
        f"**{c.get('num_speculative_tokens', '?')}**, mode {c.get('speculation_mode', '?')}, "
        f"{c.get('instance_type', '?')} TP{c.get('tensor_parallel_size', '?')}, "
        f"max-num-seqs {c.get('max_num_seqs', '?')}; prompts {bench.get('prompts', '?')}, "
        f"{bench.get('requests', '?')} requests per endpoint, max_tokens {bench.get('max_tokens', '?')}, "
        f"temperature {bench.get('temperature', '?')}",
    ]
    s = run.summary or {}
    by_class = s.get("speedup_by_prompt_class") or {}
    rows = [("all", s.get("speedup") or {})] + sorted(by_class.items())
    if any(r[1] for r in rows):
        lines += ["", "| prompt class | TPOT p50 speedup | ITL p50 | e2e p50 | throughput |", "|---|---|---|---|---|"]
        for cls, sp in rows:
            cells = [_fmt_speedup(sp.get(k)) for k in ("tpot_p50", "itl_p50", "e2e_p50", "throughput")]
            lines.append(f"| {cls} | " + " | ".join(cells) + " |")
    acc = run.acceptance_for("speculative", run.levels[0]) if run.levels else None
    if acc and isinstance(acc.get("rate"), int | float):
        lines.append(
            f"\nacceptance rate {100 * acc['rate']:.1f} %, mean acceptance length "
            f"{acc.get('mean_accepted_length', float('nan')):.2f}"
        )
    if s.get("clean") is False:
        lines.append("\n**not clean:** " + "; ".join(str(w) for w in s.get("warnings", [])[:5]))
    return "\n".join(lines)


def _fmt_speedup(sp: Any) -> str:
    if not isinstance(sp, dict) or not isinstance(sp.get("value"), int | float):
        return "n/a"
    ci = sp.get("ci95")
    if isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci):
        return f"{sp['value']:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{sp['value']:.2f}x"


def build_dashboard(runs: Sequence[DashboardRun], *, namespace: str, region: str) -> dict[str, Any]:
    """The comparison dashboard: a text widget, then per load level and prompt class ("all" first) one row
    of baseline-vs-speculative widgets: TTFT, TPOT, ITL, e2e (p50/p90/p99), throughput, acceptance, errors.

    Bars over the run's whole time range (``setPeriodToTimeRange``), so each bar is the run's percentile.
    """
    if not runs:
        raise PublishError("no run to build a dashboard for")
    start = min(r.start for r in runs) - 60
    end = max(r.end for r in runs) + 120
    multi = len({r.config_label for r in runs}) > 1
    widgets: list[dict[str, Any]] = []
    text = "\n\n---\n\n".join(r.markdown for r in runs if r.markdown) or f"# spectrn run {runs[0].run_id}"
    widgets.append({"type": "text", "x": 0, "y": 0, "width": 24, "height": 7, "properties": {"markdown": text}})
    y = 7
    levels = _sorted_levels({lv for r in runs for lv in r.levels})
    classes = sorted({c for r in runs for c in r.prompt_classes})
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("TTFT (s)", "TTFT", [("p50", ""), ("p90", ""), ("p99", "")]),
        ("TPOT (s)", "TPOT", [("p50", ""), ("p90", ""), ("p99", "")]),
        ("per-token ITL (s)", "ITL", [("p50", ""), ("p90", ""), ("p99", "")]),
        ("e2e latency (s)", "E2ELatency", [("p50", ""), ("p90", ""), ("p99", "")]),
        ("output throughput (tok/s per request)", "OutputThroughput", [("p50", ""), ("Average", "")]),
        ("acceptance", "", []),
        ("errors / requests", "Errors", [("Sum", "errors"), ("SampleCount", "requests")]),
        ("output tokens per request", "OutputTokens", [("p50", ""), ("Average", "")]),
    ]
    for level in levels:
        for pclass in [ALL_CLASSES, *classes]:
            for i, (title, metric, stats) in enumerate(panels):
                metrics: list[list[Any]] = []
                color_i = 0
                for r in runs:
                    if level not in r.levels or (pclass != ALL_CLASSES and pclass not in r.prompt_classes):
                        continue
                    for variant in r.variants:
                        color = VARIANT_COLORS.get(variant, "#7f7f7f")
                        if multi and variant != "baseline":
                            color = _PALETTE[color_i % len(_PALETTE)]
                            color_i += 1
                        dims = ["RunId", r.run_id, "Config", r.config_label, "Load", level, "Variant", variant]
                        if pclass != ALL_CLASSES:
                            dims += ["PromptClass", pclass]
                        who = f"{r.config_label} {variant}" if multi else variant
                        if metric:
                            series = [(metric, stat, f"{who} {lbl or stat}") for stat, lbl in stats]
                        elif pclass == ALL_CLASSES and r.has_acceptance and variant != "baseline":
                            series = [
                                ("AcceptanceRate", "Average", f"{who} acceptance %"),
                                ("MeanAcceptanceLength", "Average", f"{who} mean accepted length"),
                            ]
                        else:
                            series = [("TokensPerChunk", "Average", f"{who} tokens per chunk")]
                        for name, stat, label in series:
                            metrics.append([namespace, name, *dims, {"stat": stat, "label": label, "color": color}])
                if not metrics:
                    continue
                widgets.append(
                    {
                        "type": "metric",
                        "x": (i % 4) * 6,
                        "y": y + (i // 4) * 6,
                        "width": 6,
                        "height": 6,
                        "properties": {
                            "title": f"{pclass} · {level} · {title}",
                            "view": "bar",
                            "region": region,
                            "metrics": metrics,
                            "stat": "p50",
                            "period": 60,
                            "setPeriodToTimeRange": True,
                            "liveData": False,
                        },
                    }
                )
            speedup = _speedup_widget(runs, level, pclass, namespace, region, multi)
            if speedup is not None:
                speedup.update(x=0, y=y + 12, width=24, height=3)
                widgets.append(speedup)
            y += 15
    body = {"widgets": widgets, "start": _iso_ms(start), "end": _iso_ms(end), "periodOverride": "inherit"}
    validate_dashboard(body)
    return body


# (metric, stat, label, speculative over baseline?) of the speedup row; latencies: baseline / speculative.
_SPEEDUPS = [
    ("TPOT", "p50", "TPOT p50 speedup", False),
    ("ITL", "p50", "ITL p50 speedup", False),
    ("E2ELatency", "p50", "e2e p50 speedup", False),
    ("TTFT", "p50", "TTFT p50 speedup", False),
    ("OutputThroughput", "p50", "throughput p50 gain", True),
]


def _speedup_widget(
    runs: Sequence[DashboardRun], level: str, pclass: str, namespace: str, region: str, multi: bool
) -> dict[str, Any] | None:
    """Single values computed by CloudWatch metric math over the whole run: baseline p50 / speculative p50
    (throughput: speculative / baseline); > 1 means speculation helps."""
    metrics: list[list[Any]] = []
    n = 0
    for r in runs:
        if level not in r.levels or (pclass != ALL_CLASSES and pclass not in r.prompt_classes):
            continue
        if not {"baseline", "speculative"} <= set(r.variants):
            continue
        for name, stat, label, spec_over_base in _SPEEDUPS:
            ids = {}
            for variant in ("baseline", "speculative"):
                dims = ["RunId", r.run_id, "Config", r.config_label, "Load", level, "Variant", variant]
                if pclass != ALL_CLASSES:
                    dims += ["PromptClass", pclass]
                ids[variant] = f"m{n}"
                metrics.append([namespace, name, *dims, {"stat": stat, "id": f"m{n}", "visible": False}])
                n += 1
            num, den = (
                (ids["speculative"], ids["baseline"]) if spec_over_base else (ids["baseline"], ids["speculative"])
            )
            who = f"{r.config_label} " if multi else ""
            metrics.append([{"expression": f"{num}/{den}", "label": f"{who}{label}", "id": f"e{n}"}])
            n += 1
    if not metrics:
        return None
    return {
        "type": "metric",
        "properties": {
            "title": f"{pclass} · {level} · speedups over the run (baseline / speculative; > 1 = faster)",
            "view": "singleValue",
            "region": region,
            "metrics": metrics,
            "period": 60,
            "setPeriodToTimeRange": True,
            "liveData": False,
        },
    }


def _iso_ms(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def validate_dashboard(body: dict[str, Any] | str) -> dict[str, Any]:
    """Check a dashboard body's JSON shape and CloudWatch's limits (500 widgets, 500 metrics per widget,
    a 24-column grid without overlaps, valid stats and periods); raises ``PublishError`` listing problems."""
    problems: list[str] = []
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError as e:
            raise PublishError(f"dashboard body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise PublishError("dashboard body must be a JSON object with a 'widgets' list")
    extra = set(body) - {"widgets", "start", "end", "periodOverride", "variables"}
    if extra:
        problems.append(f"unknown top-level keys {sorted(extra)}")
    if ("start" in body) != ("end" in body) and "end" in body:
        problems.append("'end' needs 'start'")
    if body.get("periodOverride", "auto") not in ("auto", "inherit"):
        problems.append("periodOverride must be 'auto' or 'inherit'")
    widgets = body.get("widgets")
    if not isinstance(widgets, list) or not widgets:
        raise PublishError("dashboard body needs a non-empty 'widgets' list")
    if len(widgets) > MAX_WIDGETS:
        problems.append(f"{len(widgets)} widgets (max {MAX_WIDGETS})")
    boxes: list[tuple[int, int, int, int, int]] = []
    for n, w in enumerate(widgets):
        where = f"widget {n}"
        if not isinstance(w, dict):
            problems.append(f"{where} is not an object")
            continue
        if w.get("type") not in _WIDGET_TYPES:
            problems.append(f"{where}: type {w.get('type')!r}")
        geo = [w.get(k) for k in ("x", "y", "width", "height")]
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in geo):
            problems.append(f"{where}: x, y, width, height must be integers")
        else:
            x, yy, width, height = (int(g or 0) for g in geo)
            if not (0 <= x and 1 <= width <= 24 and x + width <= 24 and yy >= 0 and 1 <= height <= 1000):
                problems.append(f"{where}: outside the 24-column grid (x={x}, width={width}, height={height})")
            boxes.append((n, x, yy, width, height))
        props = w.get("properties")
        if not isinstance(props, dict):
            problems.append(f"{where}: 'properties' must be an object")
            continue
        if w.get("type") == "text":
            if not isinstance(props.get("markdown"), str) or not props["markdown"].strip():
                problems.append(f"{where}: text widget needs non-empty markdown")
        elif w.get("type") == "metric":
            problems += _check_metric_props(where, props)
    boxes.sort(key=lambda b: (b[2], b[1]))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            if b[2] >= a[2] + a[4]:
                break
            if a[1] < b[1] + b[3] and b[1] < a[1] + a[3] and a[2] < b[2] + b[4] and b[2] < a[2] + a[4]:
                problems.append(f"widgets {a[0]} and {b[0]} overlap")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise PublishError(f"invalid dashboard body: {shown}")
    return body


def _check_metric_props(where: str, props: dict[str, Any]) -> list[str]:
    out: list[str] = []
    metrics = props.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        return [f"{where}: metric widget needs a non-empty 'metrics' list"]
    if len(metrics) > MAX_METRICS_PER_WIDGET:
        out.append(f"{where}: {len(metrics)} metrics (max {MAX_METRICS_PER_WIDGET})")
    if not isinstance(props.get("region"), str) or not props["region"]:
        out.append(f"{where}: 'region' is required")
    if props.get("view", "timeSeries") not in _VIEWS:
        out.append(f"{where}: view {props.get('view')!r}")
    if "stat" in props and not _STAT_RE.match(str(props["stat"])):
        out.append(f"{where}: stat {props['stat']!r}")
    if "period" in props and not _valid_period(props["period"]):
        out.append(f"{where}: period {props['period']!r} (1, 5, 10, 30 or a multiple of 60)")
    ids = [e[-1]["id"] for e in metrics if isinstance(e, list) and e and isinstance(e[-1], dict) and "id" in e[-1]]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        out.append(f"{where}: metric id {dup!r} used twice")
    for i in ids:
        if not isinstance(i, str) or not re.fullmatch(r"[a-z][A-Za-z0-9_]*", i):
            out.append(f"{where}: metric id {i!r} must start with a lowercase letter")
    for m, entry in enumerate(metrics):
        if isinstance(entry, list) and len(entry) == 1 and isinstance(entry[0], dict) and "expression" in entry[0]:
            # CloudWatch's math functions are upper case; every lower-case name must be an id of this widget
            for name in re.findall(r"\b[a-z][A-Za-z0-9_]*\b", str(entry[0]["expression"])):
                if name not in ids:
                    out.append(f"{where} metric {m}: expression refers to unknown id {name!r}")
        if not isinstance(entry, list) or not entry:
            out.append(f"{where} metric {m}: must be a non-empty array")
            continue
        opts = entry[-1] if isinstance(entry[-1], dict) else None
        parts = entry[:-1] if opts is not None else entry
        if not parts:
            if not (opts and isinstance(opts.get("expression"), str) and opts["expression"].strip()):
                out.append(f"{where} metric {m}: needs namespace and name, or an expression")
            elif set(opts) - _METRIC_OPTS - {"expression"}:
                out.append(f"{where} metric {m}: unknown options {sorted(set(opts) - _METRIC_OPTS - {'expression'})}")
            elif not isinstance(opts.get("id"), str):
                out.append(f"{where} metric {m}: an expression needs an id")
            continue
        if not all(isinstance(p, str) and p for p in parts) or len(parts) % 2 or len(parts) < 2:
            out.append(f"{where} metric {m}: expected [namespace, name, dim, value, ..., {{options}}]")
        elif (len(parts) - 2) // 2 > MAX_DIMENSIONS:
            out.append(f"{where} metric {m}: more than {MAX_DIMENSIONS} dimensions")
        if opts is not None:
            unknown = set(opts) - _METRIC_OPTS
            if unknown:
                out.append(f"{where} metric {m}: unknown options {sorted(unknown)}")
            if "stat" in opts and not _STAT_RE.match(str(opts["stat"])):
                out.append(f"{where} metric {m}: stat {opts['stat']!r}")
            if "period" in opts and not _valid_period(opts["period"]):
                out.append(f"{where} metric {m}: period {opts['period']!r}")
    return out


def _valid_period(p: Any) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and (p in (1, 5, 10, 30) or (p > 0 and p % 60 == 0))


# ---- Embedded Metric Format --------------------------------------------------------------------------------


def emf_lines(
    run: RunData,
    *,
    namespace: str = "Spectrn",
    run_id: str | None = None,
    storage_resolution: int = 60,
    metrics_fn: MetricsFn | None = None,
) -> tuple[list[str], int]:
    """The same metrics, dimensions and units as ``build_metric_datums`` as EMF JSON lines (one per request,
    plus continuation lines for ITL gaps beyond EMF's 100 values per array). Returns (lines, non-finite
    values left out)."""
    validate_namespace(namespace)
    metrics_fn = metrics_fn or default_metrics_fn()
    rid = _dim_value(run_id or run.run_id)
    cfg = _dim_value(run.config_label)
    dimsets = [list(DIMS_BY_CLASS), list(DIMS_AGGREGATE)]
    skipped = 0
    lines: list[str] = []

    def line(ts_ms: int, members: dict[str, Any], values: dict[str, Any], dims: list[list[str]]) -> str:
        directive = {
            "Namespace": namespace,
            "Dimensions": dims,
            "Metrics": [{"Name": n, "Unit": METRICS[n].unit, "StorageResolution": storage_resolution} for n in values],
        }
        doc = {"_aws": {"Timestamp": ts_ms, "CloudWatchMetrics": [directive]}, **members, **values}
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)

    for rec in run.records:
        members = {
            "RunId": rid,
            "Config": cfg,
            "Load": _dim_value(rec.level),
            "Variant": _dim_value(rec.variant),
            "PromptClass": _dim_value(rec.prompt_class),
        }
        ts_ms = int(rec.sent_at * 1000)
        values: dict[str, Any] = {"Errors": 0.0 if rec.ok else 1.0}
        itls: list[float] = []
        rm = metrics_fn(rec) if rec.ok else None
        if rm is not None:
            for name, value in (
                ("TTFT", rm.ttft),
                ("TPOT", rm.tpot),
                ("E2ELatency", rm.e2e),
                ("OutputThroughput", rm.throughput_tok_s),
                ("OutputTokens", rm.output_tokens),
            ):
                if value is None:
                    continue
                if _finite(float(value)):
                    values[name] = float(value)
                else:
                    skipped += 1
            tpc = getattr(rm, "tokens_per_decode_chunk", None)
            if tpc is not None and math.isfinite(tpc):
                values["TokensPerChunk"] = float(tpc)
            itls = [x for x in (rm.itls or []) if math.isfinite(x)]
            skipped += len(rm.itls or []) - len(itls)
        if itls:
            values["ITL"] = itls[:EMF_MAX_VALUES]
        lines.append(line(ts_ms, members, values, dimsets))
        for i in range(EMF_MAX_VALUES, len(itls), EMF_MAX_VALUES):
            lines.append(line(ts_ms, members, {"ITL": itls[i : i + EMF_MAX_VALUES]}, dimsets))
    end_ms = int(run.time_range()[1] * 1000)
    for level in run.levels:
        for variant in run.variants:
            acc = run.acceptance_for(variant, level) or {}
            values = {}
            if isinstance(acc.get("rate"), int | float) and math.isfinite(acc["rate"]):
                values["AcceptanceRate"] = 100.0 * float(acc["rate"])
            length = acc.get("mean_accepted_length")
            if isinstance(length, int | float) and math.isfinite(length):
                values["MeanAcceptanceLength"] = float(length)
            if values:
                members = {"RunId": rid, "Config": cfg, "Load": level, "Variant": _dim_value(variant)}
                lines.append(line(end_ms, members, values, [list(DIMS_AGGREGATE)]))
    return lines, skipped


def write_emf(
    run_dir: Path,
    *,
    namespace: str | None = None,
    run_id: str | None = None,
    metrics_fn: MetricsFn | None = None,
) -> Path:
    """Write ``<run_dir>/metrics.emf.jsonl`` (the CloudWatch agent can ship it as-is); returns its path."""
    from spectrn.paths import atomic_write_text

    run = load_run(run_dir)
    cw = config_section(run.config, "cloudwatch")
    ns = namespace or str(cw.get("namespace") or "Spectrn")
    res = int(cw.get("storage_resolution") or 60)
    lines, _ = emf_lines(run, namespace=ns, run_id=run_id, storage_resolution=res, metrics_fn=metrics_fn)
    path = Path(run_dir) / EMF_FILE
    atomic_write_text(path, "".join(f"{ln}\n" for ln in lines))
    return path


# ---- IAM ----------------------------------------------------------------------------------------------------


def publish_iam_policy(namespace: str, dashboard_prefix: str, region: str = "*", account: str = "*") -> dict[str, Any]:
    """Least privilege for ``spectrn publish``: PutMetricData only into ``namespace`` (PutMetricData has no
    resource-level permissions, so the namespace condition key does the scoping) and Put/GetDashboard only
    on dashboards named ``<prefix>-*`` (dashboards are global: their ARN has no region)."""
    validate_namespace(namespace)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", dashboard_prefix):
        raise ConfigError(
            f"cloudwatch.dashboard_prefix={dashboard_prefix!r} may hold only letters, digits, '-' and '_'",
            hint="e.g. spectrn",
        )
    metric_condition: dict[str, Any] = {"StringEquals": {"cloudwatch:namespace": namespace}}
    if region != "*":
        metric_condition["StringEquals"]["aws:RequestedRegion"] = region
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SpectrnPutMetricData",
                "Effect": "Allow",
                "Action": "cloudwatch:PutMetricData",
                "Resource": "*",
                "Condition": metric_condition,
            },
            {
                "Sid": "SpectrnDashboards",
                "Effect": "Allow",
                "Action": ["cloudwatch:PutDashboard", "cloudwatch:GetDashboard"],
                "Resource": f"arn:aws:cloudwatch::{account}:dashboard/{dashboard_prefix}-*",
            },
        ],
    }


# ---- I/O: the sink and the publish driver --------------------------------------------------------------------


class MetricsSink(Protocol):
    """Where datums and dashboards go: CloudWatch through boto3, or a fake in tests."""

    target: str

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None: ...

    def put_dashboard(self, name: str, body: str) -> list[str]: ...


def aws_available(region: str | None = None) -> tuple[bool, str]:
    """Whether botocore resolves credentials and a region; (False, why) otherwise. Does not call AWS."""
    import boto3

    session = boto3.session.Session(region_name=region)
    if session.get_credentials() is None:
        return False, "no AWS credentials found (environment, shared config/credentials files, SSO, IRSA, IMDS)"
    if not session.region_name:
        return False, "no AWS region configured (--region, cloudwatch.region, AWS_REGION or the shared config)"
    return True, session.region_name


def require_aws(run_dir: Path, region: str | None = None) -> None:
    """Raise ``PublishError`` before any work when botocore finds no credentials or region, pointing at the
    run's EMF file (or at how to write it)."""
    ok, why = aws_available(region)
    if ok:
        return
    emf = Path(run_dir) / EMF_FILE
    where = (
        f"the same metrics are in {emf} (Embedded Metric Format; the CloudWatch agent can ship it)"
        if emf.exists()
        else f"`spectrn publish --emf {run_dir}` writes them to {emf} for the CloudWatch agent"
    )
    raise PublishError(
        f"cannot publish to CloudWatch: {why}",
        hint=f"configure AWS (aws configure, AWS_PROFILE, IRSA) and a region, or use EMF: {where}",
    )


class Boto3Sink:
    """CloudWatch through boto3's standard credential chain and region resolution, adaptive retries."""

    def __init__(self, region: str | None = None, endpoint_url: str | None = None, max_attempts: int = 8) -> None:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(region_name=region)
        if session.get_credentials() is None:
            raise PublishError(
                "no AWS credentials found by the standard chain (environment, ~/.aws, SSO, web identity/IRSA, "
                "instance metadata)",
                hint="configure credentials (aws configure / AWS_PROFILE / IRSA), or use the Embedded Metric "
                "Format file results/<run-id>/metrics.emf.jsonl with the CloudWatch agent",
            )
        if not session.region_name:
            raise PublishError(
                "no AWS region configured",
                hint="pass --region, set cloudwatch.region in spectrn.yaml, or export AWS_REGION",
            )
        self.region: str = session.region_name
        self.endpoint_url = endpoint_url
        self.target = f"{self.region}" + (f"@{endpoint_url}" if endpoint_url else "")
        config = Config(
            retries={"mode": "adaptive", "total_max_attempts": max_attempts},  # attempts incl. the first
            connect_timeout=10,
            read_timeout=60,
            user_agent_extra="spectrn",
        )
        self._client = session.client("cloudwatch", endpoint_url=endpoint_url, config=config)

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_metric_data(Namespace=namespace, MetricData=metric_data)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise PublishError(f"PutMetricData failed: {err.get('Code', '?')}: {err.get('Message', e)}") from e
        except BotoCoreError as e:
            raise PublishError(f"PutMetricData failed: {e}") from e

    def put_dashboard(self, name: str, body: str) -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            resp = self._client.put_dashboard(DashboardName=name, DashboardBody=body)
        except ClientError as e:
            err = e.response.get("Error", {})
            raise PublishError(f"PutDashboard {name} failed: {err.get('Code', '?')}: {err.get('Message', e)}") from e
        except BotoCoreError as e:
            raise PublishError(f"PutDashboard {name} failed: {e}") from e
        return [f"{m.get('DataPath', '')}: {m.get('Message', '')}" for m in resp.get("DashboardValidationMessages", [])]


@dataclass
class PublishResult:
    run_id: str
    namespace: str
    target: str
    batches: int
    sent_now: int
    already_sent: int
    datums: int
    samples: int
    dashboard: str | None
    dashboard_messages: list[str]
    state_path: Path
    nonfinite_dropped: list[str]
    time_shift_s: float
    warnings: list[str]

    def describe(self) -> list[str]:
        """Human-readable outcome, one line each."""
        lines = [
            f"published run {self.run_id} to CloudWatch namespace {self.namespace} ({self.target}): "
            f"{self.sent_now} PutMetricData calls now, {self.already_sent} already sent earlier, "
            f"{self.batches} in all ({self.datums} datums, {self.samples} samples)",
            f"progress: {self.state_path}",
        ]
        if self.time_shift_s:
            lines.append(f"timestamps shifted by {self.time_shift_s / 86400:+.2f} days (--retime)")
        if self.nonfinite_dropped:
            lines.append(f"dropped {len(self.nonfinite_dropped)} non-finite values (listed in {self.state_path.name})")
        if self.dashboard:
            lines.append(f"dashboard: {self.dashboard}")
        lines += [f"dashboard note: {m}" for m in self.dashboard_messages]
        lines += [f"warning: {w}" for w in self.warnings]
        return lines


def _load_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"version": STATE_VERSION, "targets": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise PublishError(
            f"{path} is not valid JSON: {e}",
            hint="restore it, or delete it and publish with --force knowing that already sent data is counted twice",
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("targets"), dict):
        raise PublishError(f"{path} has an unknown layout", hint="delete it and publish with --force")
    return state


def _save_state(path: Path, state: dict[str, Any]) -> None:
    from spectrn.paths import atomic_write_text

    atomic_write_text(path, json.dumps(state, indent=2, sort_keys=True) + "\n")


def _run_lock(run_dir: Path) -> AbstractContextManager[None]:
    """One publish per run folder at a time (two at once would both send the unsent calls)."""
    from spectrn.paths import folder_lock

    return folder_lock(
        run_dir,
        lambda: PublishError(
            f"another publish of {run_dir} is running",
            hint="wait for it to finish; then re-run to send anything it did not",
        ),
    )


def publish_run(
    run_dir: Path,
    sink: MetricsSink | None = None,
    *,
    console: Any = None,
    region: str | None = None,
    endpoint_url: str | None = None,
    max_attempts: int = 8,
    namespace: str | None = None,
    storage_resolution: int | None = None,
    dashboard: bool = True,
    dashboard_prefix: str | None = None,
    run_id: str | None = None,
    force: bool = False,
    retime: bool = False,
    skip_nonfinite: bool = False,
    now: float | None = None,
    metrics_fn: MetricsFn | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_datums_per_call: int = MAX_DATUMS_PER_CALL,
) -> PublishResult:
    """Publish a run's per-request distributions (and its dashboard) through ``sink``, resumably.

    Progress is saved to ``publish.json`` after every accepted call; a re-run sends only batches whose
    content hash is not recorded as sent to this namespace and target. ``force`` resends everything
    (CloudWatch then counts those samples twice). On failure raises ``PublishError`` saying what was and
    was not sent.

    Without ``sink``, CloudWatch through boto3 (``region`` or the run's ``cloudwatch.region`` or the AWS
    chain; ``endpoint_url`` or ``AWS_ENDPOINT_URL_CLOUDWATCH``). With ``console`` (a rich Console), progress
    and the outcome are printed there.
    """
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    cw = config_section(run.config, "cloudwatch")
    if sink is None:
        if endpoint_url is None:
            require_aws(run_dir, region or cw.get("region") or None)
        sink = Boto3Sink(
            region=region or cw.get("region") or None, endpoint_url=endpoint_url, max_attempts=max_attempts
        )
    if console is not None and progress is None:

        def progress(done: int, total: int) -> None:
            if done == total or done % 50 == 0:
                console.print(f"[dim]PutMetricData {done}/{total}[/]", highlight=False)

    ns = namespace or str(cw.get("namespace") or "Spectrn")
    res = int(storage_resolution or cw.get("storage_resolution") or 60)
    prefix = dashboard_prefix or str(cw.get("dashboard_prefix") or "spectrn")
    now = time.time() if now is None else now
    with _run_lock(run_dir):
        state_path = run_dir / STATE_FILE
        state = _load_state(state_path)
        key = f"{ns}@{sink.target}"
        target = state["targets"].setdefault(key, {"namespace": ns, "target": sink.target, "sent": {}})
        warnings: list[str] = []

        # Once calls went out, keep their timestamps: a re-run reproduces the same batches (and hashes) whether
        # or not --retime is repeated; re-timing data already sent at its own times would count it twice.
        recorded = float(target.get("time_shift_s") or 0.0)
        if target.get("sent") and not force:
            if retime and not recorded:
                raise PublishError(
                    f"run {run.run_id} was already published to {ns} ({sink.target}) with its original timestamps; "
                    "--retime would send the same samples again at new times (CloudWatch would count them twice)",
                    hint="re-run without --retime to finish that publish, or pass --force to publish a second copy",
                )
            shift = recorded
        elif retime:
            shift = recorded or math.floor((now - 120 - run.time_range()[1]) / 60) * 60
        else:
            shift = 0.0
        per_call = min(max_datums_per_call, MAX_DATUMS_PER_CALL)
        if target.get("sent") and not force:
            # Calls are identified by content: other batch boundaries or resolution would resend sent samples.
            for name, value in (("max_datums_per_call", per_call), ("storage_resolution", res)):
                earlier = target.get(name)
                if earlier is not None and earlier != value:
                    warnings.append(
                        f"kept {name}={earlier} of the earlier publish (not {value}): "
                        "changing it now would send samples twice"
                    )
            per_call = int(target.get("max_datums_per_call") or per_call)
            res = int(target.get("storage_resolution") or res)
        plan = build_metric_datums(
            run,
            namespace=ns,
            run_id=run_id,
            storage_resolution=res,
            time_shift_s=shift,
            skip_nonfinite=skip_nonfinite,
            metrics_fn=metrics_fn,
        )
        if not plan.datums:
            raise PublishError(f"run {run.run_id} has no measured requests to publish", hint="check requests.jsonl")
        check_timestamps(plan.datums, now, run_id=run.run_id)
        batches = batch_datums(plan.datums, namespace=ns, max_datums=per_call)
        hashes = [batch_hash(b, ns) for b in batches]
        digest = hashlib.sha256("".join(hashes).encode()).hexdigest()[:32]
        if force:
            target["sent"] = {}
        elif target.get("plan_digest") and target["plan_digest"] != digest and target["sent"]:
            warnings.append(
                "the run's data changed since the last publish to this target; batches whose content changed are sent "
                "again and CloudWatch keeps the earlier values too"
            )
        target.update(
            run_id=plan.run_id,
            plan_digest=digest,
            batches=len(batches),
            datums=len(plan.datums),
            samples=plan.samples,
            time_shift_s=shift,
            max_datums_per_call=per_call,
            storage_resolution=res,
            nonfinite_dropped=plan.nonfinite_dropped,
            updated_at=_iso(now),
        )
        sent: dict[str, Any] = target["sent"]
        already = sum(1 for h in hashes if h in sent)
        sent_now = 0
        _save_state(state_path, state)
        for i, (batch, h) in enumerate(zip(batches, hashes, strict=True)):
            if h in sent:
                continue
            try:
                sink.put_metric_data(ns, batch)
            except PublishError as e:
                missing = [j for j, hh in enumerate(hashes) if hh not in sent]
                miss_datums = sum(len(batches[j]) for j in missing)
                done = len(batches) - len(missing)
                target["last_error"] = {"batch": i, "message": e.message, "at": _iso(time.time())}
                _save_state(state_path, state)
                sent_part = (
                    f"Sent: {done}/{len(batches)} batches ({sent_now} in this attempt, {already} earlier, "
                    f"{len(plan.datums) - miss_datums} datums)"
                )
                err = PublishError(
                    f"publish of run {run.run_id} to {ns} ({sink.target}) stopped at batch {i + 1}/{len(batches)}: "
                    f"{e.message}. {sent_part}; not sent: {len(missing)} batches ({miss_datums} datums). "
                    f"Progress is saved in {state_path}",
                    hint=f"fix the cause and re-run `spectrn publish {run_dir}`: only the unsent batches are sent",
                )
                err.sent_batches = done  # type: ignore[attr-defined]
                err.unsent_batches = len(missing)  # type: ignore[attr-defined]
                raise err from e
            sent[h] = {"index": i, "datums": len(batch), "sent_at": _iso(time.time())}
            sent_now += 1
            target.pop("last_error", None)
            _save_state(state_path, state)
            if progress:
                progress(i + 1, len(batches))

        dash_name = None
        messages: list[str] = []
        if dashboard:
            dash_name, messages = publish_dashboard(
                run, sink, namespace=ns, prefix=prefix, run_id=run_id, time_shift_s=shift
            )
            target["dashboard"] = {"name": dash_name, "published_at": _iso(time.time())}
            _save_state(state_path, state)
        result = PublishResult(
            run_id=plan.run_id,
            namespace=ns,
            target=sink.target,
            batches=len(batches),
            sent_now=sent_now,
            already_sent=already,
            datums=len(plan.datums),
            samples=plan.samples,
            dashboard=dash_name,
            dashboard_messages=messages,
            state_path=state_path,
            nonfinite_dropped=plan.nonfinite_dropped,
            time_shift_s=shift,
            warnings=warnings,
        )
        if console is not None:
            for line in result.describe():
                console.print(line, highlight=False, soft_wrap=True)
        return result


def recorded_time_shift(run_dir: Path, namespace: str, target: str | None = None) -> float:
    """The ``--retime`` shift an earlier publish of this run used (0 when none), so the dashboard's time range
    matches the data."""
    path = Path(run_dir) / STATE_FILE
    if not path.exists():
        return 0.0
    targets = _load_state(path)["targets"]
    for t in targets.values():
        if t.get("namespace") == namespace and (target is None or t.get("target") == target):
            return float(t.get("time_shift_s") or 0.0)
    return 0.0


def publish_dashboard(
    run: RunData | Sequence[RunData],
    sink: MetricsSink,
    *,
    namespace: str,
    prefix: str = "spectrn",
    run_id: str | None = None,
    time_shift_s: float | Sequence[float] = 0.0,
    region: str | None = None,
) -> tuple[str, list[str]]:
    """Build, validate and put one dashboard for one run, or for several (a sweep's cells, each published with
    the sweep's id as ``run_id``: one line per Config); returns (name, CloudWatch's validation messages)."""
    runs = [run] if isinstance(run, RunData) else list(run)
    shifts = [time_shift_s] * len(runs) if isinstance(time_shift_s, int | float) else list(time_shift_s)
    views = [dashboard_run(r, run_id=run_id, time_shift_s=sh) for r, sh in zip(runs, shifts, strict=True)]
    body = build_dashboard(views, namespace=namespace, region=region or str(getattr(sink, "region", "us-east-1")))
    name = dashboard_name(prefix, views[0].run_id)
    return name, sink.put_dashboard(name, json.dumps(body, separators=(",", ":")))
