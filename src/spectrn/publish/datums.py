"""Run records -> PutMetricData datums (raw values with counts, never summaries) and their batches."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from spectrn import labels
from spectrn.analyze.metric_table import Metric, of_source, published
from spectrn.analyze.metrics import RequestMetrics, request_metrics
from spectrn.analyze.run import ensure_summary
from spectrn.errors import ConfigError, PublishError
from spectrn.publish.limits import (
    MAX_DATUMS_PER_CALL,
    MAX_VALUES_PER_DATUM,
    MIN_ABS_VALUE,
    REQUEST_BYTES_BUDGET,
    estimate_request_bytes,
    validate_datum,
    validate_namespace,
)
from spectrn.run.folder import RunFolder, dim_value
from spectrn.run.records import RequestRecord
from spectrn.run.summary import Summary

# Dimension names, outermost first; PromptClass is dropped for the aggregate dimension set.
DIMS_AGGREGATE = ("RunId", "Config", "Load", "Variant")


DIMS_BY_CLASS = (*DIMS_AGGREGATE, "PromptClass")


ALL_CLASSES = labels.ALL_CLASSES


# Every published metric by name, from the metric table (its unit, meaning and where its values come from); the
# builders below read the table when they run.
METRICS: dict[str, Metric] = published()


def goodput_values(summary: Summary) -> list[tuple[str, str, str | None, dict[str, float]]]:
    """(level, variant, prompt class or None for all classes, {metric: value}) of every scope with goodput
    (a run without a per-request SLO has none); non-finite values are left out (they are never computed)."""
    out = []
    for lv in summary.levels:
        for cls, cs in lv.scopes():
            for variant, vs in cs.variants.items():
                g = vs.goodput
                if g is None or not g.slos:
                    continue
                values = {}
                for m in of_source("goodput"):
                    assert m.goodput is not None
                    x = m.goodput(g)
                    if isinstance(x, int | float) and math.isfinite(x):
                        values[m.name] = float(x)
                if values:
                    out.append((lv.label, variant, None if cls == ALL_CLASSES else cls, values))
    return out


MetricsFn = Callable[[RequestRecord], RequestMetrics | None]


def default_metrics_fn(time_scale: float = 1.0) -> MetricsFn:
    """Per-request metrics in real time (a simulated run's durations divided by its time scale)."""
    return lambda rec: request_metrics(rec, time_scale)


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
        pairs = np.stack([shift, mant], axis=1)
        uniq, cnt = np.unique(pairs, axis=0, return_counts=True)
        keys = [(int(s), int(m)) for s, m in uniq]
        counts = [int(c) for c in cnt]
    decoded: dict[float, int] = {}
    for (s, m), c in zip(keys, counts, strict=True):
        # distinct keys can be one value: 9.9996 rounds to mantissa 10000 at exponent -3, 10.001 to 1000 at -2
        v = float(f"{m}e{s}")
        decoded[v] = decoded.get(v, 0) + c
    n_zero = int(zero.sum())
    if n_zero:  # a value at or above MIN_ABS_VALUE never rounds to 0
        decoded[0.0] = n_zero
    ordered = sorted(decoded)
    return ordered, [float(decoded[v]) for v in ordered]


class RoundedCounts:
    """``round_sig`` of every value added to each series, kept as counts of rounded values as they come.

    A million requests carry about 10^8 token gaps; kept as Python floats they need gigabytes, while their
    rounded values (``sig_digits`` significant digits) are a few thousand per series. Values wait in a buffer
    (at most ``max_pending`` over all series, then every series is folded) and are rounded in numpy batches.
    Rounding is per value and equal rounded values merge their counts, so the result is exactly ``round_sig``
    of all the values of a series at once."""

    def __init__(self, sig_digits: int, max_pending: int = 1 << 20) -> None:
        self.sig_digits = sig_digits
        self.max_pending = max_pending
        self.pending: dict[Any, list[float]] = defaultdict(list)
        self.counts: dict[Any, dict[float, int]] = defaultdict(dict)
        self.n_pending = 0

    def add(self, key: Any, values: Sequence[float]) -> None:
        self.pending[key].extend(values)
        self.n_pending += len(values)
        if self.n_pending >= self.max_pending:
            for k in list(self.pending):
                self._fold(k)

    def _fold(self, key: Any) -> None:
        values = self.pending.pop(key, None)
        if not values:
            return
        self.n_pending -= len(values)
        counts = self.counts[key]
        rounded, n = round_sig(values, self.sig_digits)
        for v, c in zip(rounded, n, strict=True):
            counts[v] = counts.get(v, 0) + int(c)

    def series(self) -> dict[Any, dict[float, int]]:
        """Every series' counts of rounded values (all pending values folded in)."""
        for k in list(self.pending):
            self._fold(k)
        return self.counts


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def build_metric_datums(
    run: RunFolder,
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
    summary = ensure_summary(run)
    metrics_fn = metrics_fn or default_metrics_fn(summary.provenance.time_scale)
    rid = dim_value(run_id or run.run_id)
    cfg = dim_value(summary.config_label)
    start, end = summary.time_range or (run.meta.started_at, run.meta.finished_at or run.meta.started_at)

    # (metric, variant, level, class, bucket) -> counts of rounded values
    per_request_values = RoundedCounts(sig_digits)
    bad: list[str] = []
    errors, per_request, gap_lists = of_source("errors"), of_source("request"), of_source("gaps")
    for rec in run.records():
        bucket = int(math.floor(rec.sent_at / bucket_s) * bucket_s)
        key = (dim_value(rec.variant), dim_value(rec.level), dim_value(rec.prompt_class), bucket)
        for m in errors:
            per_request_values.add((m.name, *key), (0.0 if rec.ok else 1.0,))
        if not rec.ok:
            continue
        rm = metrics_fn(rec)
        if rm is None:
            continue
        where = f"{rec.variant} request {rec.index} ({rec.prompt_id})"
        for m in per_request:
            assert m.request is not None
            value = m.request(rm)
            if value is None:
                continue
            if not math.isfinite(value):
                bad.append(f"{m.name} of {where} is {value}")
                continue
            per_request_values.add((m.name, *key), (float(value),))
        for m in gap_lists:
            assert m.gaps is not None
            gaps = m.gaps(rm) or []
            if not gaps:
                continue
            if math.isfinite(sum(gaps)):  # NaN and +-Inf all make the sum non-finite
                per_request_values.add((m.name, *key), gaps)
            else:
                finite = [x for x in gaps if math.isfinite(x)]
                bad.append(f"{m.name} of {where} has {len(gaps) - len(finite)} non-finite gaps")
                per_request_values.add((m.name, *key), finite)

    accept_ts = int(math.floor(end / bucket_s) * bucket_s)
    if bad and not skip_nonfinite:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise PublishError(
            f"run {run.run_id}: {len(bad)} non-finite value(s) (NaN/Inf), which CloudWatch rejects: {shown}",
            hint="fix the records (re-run `spectrn analyze` or the bench), or pass --skip-nonfinite to drop "
            "those values; dropped values are listed in publish.json",
        )

    # Aggregate dimension set: the union over prompt classes (counts of rounded values add up exactly).
    counted: dict[tuple[str, tuple[tuple[str, str], ...], int], dict[float, int]] = defaultdict(dict)
    for (name, variant, level, pclass, bucket), of_class in per_request_values.series().items():
        base = (("RunId", rid), ("Config", cfg), ("Load", level), ("Variant", variant))
        counted[(name, (*base, ("PromptClass", pclass)), bucket)] = of_class
        total = counted[(name, base, bucket)]
        for v, c in of_class.items():
            total[v] = total.get(v, 0) + c
    del per_request_values
    # run-level values (acceptance, goodput): a few per level and variant, rounded when the datums are made
    series: dict[tuple[str, tuple[tuple[str, str], ...], int], list[float]] = defaultdict(list)
    for lv in summary.levels:
        for variant, vs in lv.variants.items():
            acc = vs.acceptance
            if acc is None:
                continue
            base = (("RunId", rid), ("Config", cfg), ("Load", dim_value(lv.label)), ("Variant", dim_value(variant)))
            for m in of_source("acceptance"):
                assert m.acceptance is not None
                x = m.acceptance(acc)
                if isinstance(x, int | float):
                    if math.isfinite(x):
                        series[(m.name, base, accept_ts)].append(float(x))
                    else:
                        bad.append(f"{m.name} of {variant} is {x}")
    for g_level, g_variant, g_class, good in goodput_values(summary):
        gdims: tuple[tuple[str, str], ...] = (
            ("RunId", rid), ("Config", cfg), ("Load", dim_value(g_level)), ("Variant", dim_value(g_variant))
        )  # fmt: skip
        if g_class is not None:
            gdims = (*gdims, ("PromptClass", dim_value(g_class)))
        for name, value in good.items():
            series[(name, gdims, accept_ts)].append(value)
    if bad and not skip_nonfinite:
        raise PublishError(
            f"run {run.run_id}: non-finite acceptance value(s): {'; '.join(bad[:5])}",
            hint="fix acceptance.json, or pass --skip-nonfinite to drop those values",
        )

    datums: list[dict[str, Any]] = []
    samples = 0
    table = published()
    for k, raw in series.items():
        into = counted[k]
        for value, count in zip(*round_sig(raw, sig_digits), strict=True):
            into[value] = into.get(value, 0) + int(count)
    for name, dims, bucket in sorted(counted):
        spec = table[name]
        merged = counted.pop((name, dims, bucket))  # each series' counts go as its datums are made: one copy at a time
        values = sorted(merged)
        counts = [float(merged[v]) for v in values]
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
    return DatumPlan(namespace, rid, datums, samples, bad, time_shift_s, start + time_shift_s, end + time_shift_s)


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
