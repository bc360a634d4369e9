"""Embedded Metric Format lines: the same metrics as log events, for the CloudWatch agent (no AWS call)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spectrn.analyze.metric_table import of_source, published
from spectrn.analyze.run import ensure_summary
from spectrn.publish.datums import (
    DIMS_AGGREGATE,
    DIMS_BY_CLASS,
    MetricsFn,
    _finite,
    default_metrics_fn,
    goodput_values,
)
from spectrn.publish.limits import EMF_MAX_VALUES, validate_namespace
from spectrn.run.folder import RunFolder, dim_value


def emf_lines(
    run: RunFolder,
    *,
    namespace: str = "Spectrn",
    run_id: str | None = None,
    storage_resolution: int = 60,
    metrics_fn: MetricsFn | None = None,
) -> tuple[list[str], int]:
    """The same metrics, dimensions and units as ``build_metric_datums`` as EMF JSON lines (one per request,
    plus continuation lines for ITL gaps beyond EMF's 100 values per array). Returns (lines, non-finite
    values left out). Holds every line: for a file, ``write_emf`` streams ``iter_emf_lines`` instead."""
    skipped = [0]
    lines = list(
        iter_emf_lines(
            run,
            namespace=namespace,
            run_id=run_id,
            storage_resolution=storage_resolution,
            metrics_fn=metrics_fn,
            skipped=skipped,
        )
    )
    return lines, skipped[0]


def iter_emf_lines(
    run: RunFolder,
    *,
    namespace: str = "Spectrn",
    run_id: str | None = None,
    storage_resolution: int = 60,
    metrics_fn: MetricsFn | None = None,
    skipped: list[int] | None = None,
) -> Iterator[str]:
    """``emf_lines``' lines, each made as it is asked for (one record in memory at a time, so a run of a million
    requests is written in bounded memory); the count of non-finite values left out is added to ``skipped[0]``
    when given."""
    validate_namespace(namespace)
    summary = ensure_summary(run)
    metrics_fn = metrics_fn or default_metrics_fn(summary.provenance.time_scale)
    rid = dim_value(run_id or run.run_id)
    cfg = dim_value(summary.config_label)
    dimsets = [list(DIMS_BY_CLASS), list(DIMS_AGGREGATE)]
    table = published()
    errors, per_request, gap_lists = of_source("errors"), of_source("request"), of_source("gaps")
    counter = skipped if skipped is not None else [0]

    def line(ts_ms: int, members: dict[str, Any], values: dict[str, Any], dims: list[list[str]]) -> str:
        directive = {
            "Namespace": namespace,
            "Dimensions": dims,
            "Metrics": [{"Name": n, "Unit": table[n].unit, "StorageResolution": storage_resolution} for n in values],
        }
        doc = {"_aws": {"Timestamp": ts_ms, "CloudWatchMetrics": [directive]}, **members, **values}
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)

    for rec in run.records():
        members = {
            "RunId": rid,
            "Config": cfg,
            "Load": dim_value(rec.level),
            "Variant": dim_value(rec.variant),
            "PromptClass": dim_value(rec.prompt_class),
        }
        ts_ms = int(rec.sent_at * 1000)
        values: dict[str, Any] = {m.name: 0.0 if rec.ok else 1.0 for m in errors}
        gaps: dict[str, list[float]] = {}
        rm = metrics_fn(rec) if rec.ok else None
        if rm is not None:
            for m in per_request:
                assert m.request is not None
                value = m.request(rm)
                if value is None:
                    continue
                if _finite(float(value)):
                    values[m.name] = float(value)
                else:
                    counter[0] += 1
            for m in gap_lists:
                assert m.gaps is not None
                raw = m.gaps(rm) or []
                gaps[m.name] = [x for x in raw if math.isfinite(x)]
                counter[0] += len(raw) - len(gaps[m.name])
        for name, g in gaps.items():
            if g:
                values[name] = g[:EMF_MAX_VALUES]
        yield line(ts_ms, members, values, dimsets)
        for name, g in gaps.items():
            for i in range(EMF_MAX_VALUES, len(g), EMF_MAX_VALUES):
                yield line(ts_ms, members, {name: g[i : i + EMF_MAX_VALUES]}, dimsets)
    end_ms = int((summary.time_range or (run.meta.started_at, run.meta.started_at))[1] * 1000)
    for lv in summary.levels:
        for variant, vs in lv.variants.items():
            acc = vs.acceptance
            values = {}
            for m in of_source("acceptance") if acc is not None else []:
                assert m.acceptance is not None and acc is not None
                x = m.acceptance(acc)
                if x is not None and math.isfinite(x):
                    values[m.name] = x
            if values:
                members = {"RunId": rid, "Config": cfg, "Load": dim_value(lv.label), "Variant": dim_value(variant)}
                yield line(end_ms, members, values, [list(DIMS_AGGREGATE)])
    for level, variant, pclass, good in goodput_values(summary):
        members = {"RunId": rid, "Config": cfg, "Load": dim_value(level), "Variant": dim_value(variant)}
        if pclass is not None:
            members["PromptClass"] = dim_value(pclass)
        yield line(end_ms, members, good, [list(DIMS_BY_CLASS if pclass is not None else DIMS_AGGREGATE)])


def write_emf(
    run_dir: Path,
    *,
    namespace: str | None = None,
    run_id: str | None = None,
    metrics_fn: MetricsFn | None = None,
) -> Path:
    """Write ``<run_dir>/metrics.emf.jsonl`` (the CloudWatch agent can ship it as-is); returns its path."""
    run = RunFolder.open(run_dir)
    cw = run.meta.config.cloudwatch
    ns = namespace or cw.namespace
    lines = iter_emf_lines(
        run, namespace=ns, run_id=run_id, storage_resolution=cw.storage_resolution, metrics_fn=metrics_fn
    )
    return run.write_emf(lines)
