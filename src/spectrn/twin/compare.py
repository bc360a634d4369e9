"""Predicted against measured: a twin's prediction for the very workload a run sent, next to what it measured.

For each run folder (a bench, a sweep cell, a run on the twin itself or on the real servers) the prediction is
made with the run's own window, load levels, request count, output length, class order (the bench's seeded
schedule, rebuilt from its prompt set) and start ramp (``run.json``'s ``load_shape``, in real seconds), so a
difference is the model's, not the workload's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from spectrn.run.folder import RunFolder
from spectrn.twin.model import Twin
from spectrn.twin.predict import Estimate, Prediction, predict


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str
    window: int | None
    concurrency: int
    scope: str  # a prompt class, or "all" for throughput
    metric: Literal["tpot_s", "throughput_tok_s"]
    measured: float
    predicted: Estimate

    @property
    def error(self) -> float:
        return self.predicted.value / self.measured - 1.0


def bench_order(prompts: str, requests: int, warmup: int, seed: int) -> list[str] | None:
    """The prompt class of each measured request in the order a bench sends them (None: the set is unreadable)."""
    from spectrn.errors import ConfigError
    from spectrn.loadgen.prompts import build_schedule
    from spectrn.loadgen.workloads import load_workload

    try:
        prompt_set, _ = load_workload(prompts, seed=seed)
    except ConfigError:
        return None
    schedule = build_schedule(prompt_set, requests=requests, warmup=warmup, seed=seed)
    return [r.prompt_class for r in schedule if not r.warmup]


def default_ramps(levels: Sequence[int], time_scale: float = 1.0) -> dict[int, float]:
    """The load generator's automatic closed-loop ramp per level, in real seconds for a bench at ``time_scale``
    (``spectrn.loadgen.schedulers.closed_loop_ramp``; its cap at half a warm-up request is not modelled)."""
    from spectrn.loadgen.schedulers import AUTO_RAMP_MAX_S, AUTO_RAMP_STEP_S

    return {c: min(AUTO_RAMP_STEP_S * (c - 1), AUTO_RAMP_MAX_S) / time_scale for c in levels}


def compare_runs(
    twin: Twin, run_dirs: Sequence[Path], *, samples: int = 100, seed: int = 0, skipped: list[str] | None = None
) -> list[Point]:
    """Predicted and measured TPOT p50 per class and throughput, per variant and level of every run.

    Only runs of the twin's own draft are compared: a twin predicts its draft's acceptance, so another draft's
    cells (a sweep over drafts) would read as prediction errors. Each run left out is named in ``skipped``."""
    from spectrn.analyze.run import ensure_summary
    from spectrn.run.measured import measured
    from spectrn.run.summary import Load

    points: list[Point] = []
    classes = {c.name for c in twin.preset.acceptance.classes}
    for path in run_dirs:
        folder = RunFolder.open(path)
        summary = ensure_summary(folder)
        meta = folder.meta
        cfg = meta.config
        draft = measured(cfg, summary.provenance).draft  # the server's own where spectrn learnt it
        if draft is not None and draft != twin.calibration.draft:
            if skipped is not None:
                skipped.append(
                    f"{folder.run_id}: draft {draft}, not the twin's {twin.calibration.draft}: not compared (a twin "
                    "predicts its own draft; calibrate one per draft)"
                )
            continue
        server = summary.provenance.servers.get("speculative")
        window = server.window if server is not None and server.window else cfg.num_speculative_tokens
        scale = summary.provenance.time_scale or 1.0
        levels = [lv for lv in summary.levels if lv.load.kind == "closed" and lv.load.concurrency]
        if not levels:
            continue
        counts: dict[str, int] = {}
        for rec in folder.records():
            if rec.variant == "baseline" and rec.prompt_class in classes:
                counts[rec.prompt_class] = counts.get(rec.prompt_class, 0) + 1
        if not counts:
            continue
        order = bench_order(cfg.bench.prompts, cfg.bench.requests, cfg.bench.warmup, cfg.bench.seed)
        if order is not None and not set(order) <= classes:
            order = None
        ramps: dict[int, float] = {}
        for lv in levels:
            shape = meta.load_shape.get(lv.label)
            ramp = shape.ramp_s if shape is not None else None
            c = Load.parse(lv.label).concurrency or 1
            ramps[c] = float(ramp) / scale if isinstance(ramp, int | float) else default_ramps([c], scale)[c]
        pred: Prediction = predict(
            twin,
            windows=[window],
            levels=sorted(ramps),
            mix=counts,
            requests=cfg.bench.requests,
            max_tokens=cfg.bench.max_tokens,
            order=order,
            ramp_s=ramps,
            samples=samples,
            seed=seed,
        )
        cells = {(c.concurrency, c.window): c for c in pred.cells}
        for lv in levels:
            conc = lv.load.concurrency or 1
            for variant, w in (("baseline", None), ("speculative", window)):
                cell = cells[(conc, w)]
                vs = lv.variants.get(variant)
                if vs is not None and vs.output_tokens_per_s.aggregate:
                    points.append(
                        Point(run=folder.run_id, window=w, concurrency=conc, scope="all", metric="throughput_tok_s",
                              measured=vs.output_tokens_per_s.aggregate, predicted=cell.throughput_tok_s)
                    )  # fmt: skip
                for cls, cs in sorted(lv.by_prompt_class.items()):
                    cv = cs.variants.get(variant)
                    if cls not in cell.tpot_s or cv is None or cv.tpot_s.p50 is None:
                        continue
                    points.append(
                        Point(run=folder.run_id, window=w, concurrency=conc, scope=cls, metric="tpot_s",
                              measured=cv.tpot_s.p50, predicted=cell.tpot_s[cls])
                    )  # fmt: skip
    return points
