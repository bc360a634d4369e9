"""What a benchmark run is asked to do (``RunPlan``: endpoints, schedule, levels, load shape) and what it returned.

``RunPlan`` is written by ``bench/local.py`` (from the config) and read by every stage of a run: the pre-run
checks (``loadgen/prepare.py``), the schedulers (``loadgen/schedulers.py``), the record sink's file budget and
the run itself (``loadgen/runner.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectrn.loadgen.arrivals import Level, TraceRow
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.prompts import ScheduledRequest
from spectrn.run.summary import Provenance


@dataclass
class RunPlan:
    run_id: str
    out_dir: Path
    endpoints: dict[str, str]
    schedule: Sequence[ScheduledRequest]
    params: RequestParams
    levels: list[Level]
    mode: str = "simultaneous"
    seed: int = 0
    shard: int = 0
    shards: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    engine: str = "spectrn"
    ramp_s: float | None = None  # None: automatic (closed_loop_ramp)
    provenance: Provenance | None = None
    duration_s: float | None = None  # each level ends this long after its start (bench.duration_s)
    trace: Sequence[TraceRow] | None = None  # a "trace" level's rows: measured request k starts at row k
    trace_file: str = ""
    trace_first_index: int = 0  # schedule index of the first measured request (row 0): the warm-up count


@dataclass
class RunOutcome:
    run_dir: Path
    counts: dict[str, dict[str, int]]
    acceptance: dict[str, dict[str, Any] | None]
    interrupted: bool
    notes: list[str]


def _trace_row(plan: RunPlan, req: ScheduledRequest) -> TraceRow | None:
    """The trace row a measured request replays (row k for the k-th measured request); none for warm-up."""
    if plan.trace is None or req.warmup:
        return None
    k = req.index - plan.trace_first_index
    return plan.trace[k] if 0 <= k < len(plan.trace) else None
