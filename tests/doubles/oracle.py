"""Expected per-request figures written out from their definitions, for tests downstream of analysis (publish,
report, sweep, reliability): those tests compare what spectrn publishes or shows with these, never with
``spectrn.analyze.metrics.request_metrics`` (the code under test upstream).

Definitions (docs/architecture.md, inference-perf's): TTFT = first event; TPOT = (e2e - TTFT) / (n - 1) with n
the output tokens; per-token ITL: an event that carries k tokens after a gap g is k samples of g / k; the median
of per-token values is the median of that expanded list.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from spectrn.run.records import RequestRecord


def tokens(rec: RequestRecord) -> int:
    return rec.completion_tokens if rec.completion_tokens is not None else sum(rec.chunk_tokens)


def tpot(rec: RequestRecord) -> float | None:
    assert rec.ttft is not None and rec.e2e is not None
    n = tokens(rec)
    return (rec.e2e - rec.ttft) / (n - 1) if n > 1 else None


def itls(rec: RequestRecord) -> list[float]:
    out: list[float] = []
    for i in range(1, len(rec.chunk_times)):
        k = rec.chunk_tokens[i]
        out += [(rec.chunk_times[i] - rec.chunk_times[i - 1]) / k] * k
    return out


def throughput(rec: RequestRecord) -> float:
    assert rec.e2e is not None
    return tokens(rec) / rec.e2e


def weighted_median(values: Any, weights: Any) -> float:
    """The median of ``values`` with each value repeated ``weights`` times (whole-number weights, e.g. the
    tokens of each event), by definition: numpy's median of the expanded list; NaN when it is empty."""
    expanded = np.repeat(np.asarray(values, dtype=float), np.asarray(weights).astype(np.int64))
    return float(np.median(expanded)) if expanded.size else math.nan
