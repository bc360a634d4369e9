"""Running a sweep: the grid cell by cell through a runner, resumable, then the analysis."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import AnalysisError, ConfigError, Interrupted, SpectrnError
from spectrn.events import Emitter, OnEvent, fmt_duration
from spectrn.labels import window_label
from spectrn.paths import atomic_write_text, safe_output_dir
from spectrn.run.sweep_analysis import SweepAnalysis, SweepPrediction
from spectrn.run.sweep_manifest import CellEquivalence, SweepCell, SweepSettings
from spectrn.sweep.cells import aggregate_equivalence, cell_inputs
from spectrn.sweep.grid import (
    Cell,
    cell_config,
    check_sweep_id,
    estimate_cell_s,
    fingerprint,
    grid,
    levels_of,
)
from spectrn.sweep.manifest import Manifest, finite
from spectrn.sweep.recommend import CellInput
from spectrn.sweep.runners import CellRunner, _LazyRunner
from spectrn.windows import WindowSemantics


def _sweep_lock(sweep_dir: Path, sweep_id: str) -> AbstractContextManager[None]:
    """One process per sweep folder: a second one would delete the first one's unfinished cell as stale."""
    from spectrn.paths import folder_lock

    return folder_lock(
        sweep_dir,
        lambda: ConfigError(
            f"sweep {sweep_id} is being run by another process right now",
            hint="wait for it to finish (or stop it), then resume; or choose another --sweep-id",
        ),
    )


@dataclass
class SweepOptions:
    drafts: list[str]
    windows: list[int]
    predict: bool = False
    weights: dict[str, float] | None = None
    quiet: bool = False
    min_gain: float = 0.05
    objective: tuple[str, str] | None = None  # (name, e2e percentile); None: cost with SLOs, else tpot


@dataclass
class CellsRun:
    """Which cells this invocation ran and which it found finished."""

    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


@dataclass
class SweepResult:
    sweep_dir: Path
    ran: list[str]
    skipped: list[str]
    analysis: SweepAnalysis


class Sweep:
    """Runs the cells of one sweep with a runner, records them, and analyzes whatever is finished."""

    def __init__(
        self,
        cfg: SpectrnConfig,
        sweep_id: str,
        out_root: Path,
        opts: SweepOptions,
        on_event: OnEvent | None = None,
        *,
        resume: bool = False,
    ) -> None:
        self.cfg = cfg
        self.sweep_id = check_sweep_id(sweep_id)
        self.sweep_dir = safe_output_dir(out_root, what="--out-dir") / self.sweep_id
        self.opts = opts
        self.on_event = on_event
        self.emit = Emitter(on_event)
        self.levels = levels_of(cfg)
        settings = SweepSettings(
            drafts=opts.drafts,
            windows=opts.windows,
            levels=self.levels,
            prompts=cfg.bench.prompts,
            requests=cfg.bench.requests,
            max_tokens=cfg.bench.max_tokens,
            predict=opts.predict,
            target=cfg.target,
            runtime=cfg.runtime,
        )
        for d in opts.drafts:  # fail before anything runs on an invalid draft or window
            for w in opts.windows:
                cell_config(cfg, Cell(d, w, self.levels[0]))
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        self.manifest = Manifest.open(self.sweep_dir, self.sweep_id, settings, fingerprint(cfg), resume=resume)

    # ---- running ----
    def _cell_dir(self, cell: Cell) -> Path:
        return self.sweep_dir / "cells" / cell.config_dir

    def run_cells(self, cells: Sequence[Cell], lazy: _LazyRunner, result: CellsRun, *, phase: str = "") -> None:
        todo = [c for c in cells if not self.manifest.done(c)]
        for c in cells:
            if self.manifest.done(c) and c.key not in result.skipped:
                result.skipped.append(c.key)
        if result.skipped and todo:
            self.emit("info", f"resuming: {len(result.skipped)} cell(s) already finished, {len(todo)} to run")
        if not todo:
            return
        runner = lazy.get()
        tpot = runner.probe_tpot(self.cfg)
        assumed = tpot is None
        tpot = tpot if tpot is not None else 0.05 * (self.cfg.sim.time_scale if self.cfg.runtime == "sim" else 1.0)
        estimates = {c.key: estimate_cell_s(self.cfg, c, tpot) for c in todo}
        total = sum(estimates.values())
        how = "assumed 50 ms/token (no probe possible)" if assumed else f"probed baseline {tpot * 1e3:.1f} ms/token"
        extra = (
            "; plus deploy (and compile, where artifacts are missing) per configuration"
            if runner.where == "cluster"
            else ""
        )
        self.emit(
            "heading",
            f"{phase or 'sweep'}: {len(todo)} cell(s) on the {runner.where}, estimated {fmt_duration(total)} "
            f"({how}){extra}",
        )
        task = f"{self.sweep_id}:{phase or 'sweep'}"
        started = time.monotonic()
        spent_est = 0.0
        for n, cell in enumerate(todo, 1):
            elapsed = time.monotonic() - started
            ratio = elapsed / spent_est if spent_est > 0 else 1.0
            remaining = ratio * sum(estimates[c.key] for c in todo[n - 1 :])
            self.emit.progress(
                task, f"[{n}/{len(todo)}] {cell.draft} window {cell.window} at {cell.level}", completed=n - 1,
                total=len(todo), unit="cells", group=task, eta_s=remaining, announce=True,
            )  # fmt: skip
            resume = f"`spectrn sweep --resume --sweep-id {self.sweep_id}` with the same flags runs only the rest"
            try:
                self.run_one(cell, runner)
            except (KeyboardInterrupt, Interrupted):
                done = len(self.manifest.model.cells)
                raise Interrupted(
                    f"sweep {self.sweep_id} stopped during {cell.key}; {done} finished cell(s) are kept",
                    hint=resume,
                ) from None
            except SpectrnError as e:
                e.hint = (e.hint + "; " if e.hint else "") + f"finished cells are kept: {resume}"
                raise
            result.ran.append(cell.key)
            spent_est += estimates[cell.key]
        self.emit.progress(task, phase or "sweep", completed=len(todo), total=len(todo), unit="cells", group=task)

    def run_one(self, cell: Cell, runner: CellRunner) -> None:
        from spectrn.finish import finish

        cfg = cell_config(self.cfg, cell)
        out_root = self._cell_dir(cell)
        # A folder without a manifest entry is a cell that did not finish: start it afresh, never append to it.
        for stale in _stale_runs(out_root, cell, runner):
            shutil.rmtree(stale)
        t0 = time.time()
        run_dir = runner.run(cfg, cell, out_root, self.on_event, self.opts.quiet)
        summary = finish(run_dir, report=False).summary  # the same finish as every run; one report for the sweep
        view = summary.level(cell.level) if cell.level in summary.level_labels else summary.levels[0]
        eq = view.equivalence
        finished = time.time()
        self.manifest.record(
            cell,
            SweepCell(
                draft=cell.draft,
                window=cell.window,
                level=cell.level,
                run_dir=str(run_dir.relative_to(self.sweep_dir)),
                started_at=t0,
                finished_at=finished,
                duration_s=finished - t0,
                clean=summary.clean,
                equivalence=CellEquivalence(compared=eq.compared, matched=eq.matched, match_rate=eq.match_rate)
                if eq
                else CellEquivalence(),
            ),
        )
        for cls, cs in sorted(view.by_prompt_class.items()):
            sp = cs.speedup.tpot_p50 if cs.speedup else None
            if sp is not None and sp.value is not None:
                self.emit("info", f"    {cls}: TPOT p50 speedup {sp.text()}")
        if eq is not None and eq.compared and eq.matched != eq.compared:
            self.emit(
                "alert",
                f"    OUTPUT DIVERGENCE in {cell.key}: {eq.compared - eq.matched} of {eq.compared} greedy outputs "
                "differ",
            )

    # ---- the two modes ----
    def run(self, runner_factory: Callable[[], AbstractContextManager[CellRunner]]) -> SweepResult:
        """Run every unfinished cell (or the predict flow), then analyze everything finished. The runtime is
        started only when a cell actually needs to run, and always stopped."""
        result = CellsRun()
        cells = grid(self.opts.drafts, self.opts.windows, self.levels)
        with ExitStack() as stack:
            stack.enter_context(_sweep_lock(self.sweep_dir, self.sweep_id))
            runner = _LazyRunner(runner_factory, stack)
            if self.opts.predict:
                self._predict_flow(runner, result)
            else:
                self.run_cells(cells, runner, result)
        return SweepResult(self.sweep_dir, result.ran, result.skipped, self.analyze())

    def _predict_flow(self, runner: _LazyRunner, result: CellsRun) -> None:
        k_max = max(self.opts.windows)
        level = self.levels[0]
        if len(self.levels) > 1:
            self.emit("warning", f"note: --predict works at one load level; using {level}")
        first = [Cell(d, k_max, level) for d in self.opts.drafts]
        self.emit(
            "info",
            f"predict: window {k_max} for {len(first)} draft(s), then one confirmation run of the predicted optimum "
            f"(instead of {len(self.opts.drafts) * len(self.opts.windows)} grid cells)",
        )
        self.run_cells(first, runner, result, phase=f"predict: measuring window {k_max}")
        choice = self.prediction().choice
        if choice is None:
            raise AnalysisError(
                "no prediction could be made from the large-window run(s)",
                hint="check that the runs completed and that the server streams token ids",
            )
        self.emit(
            "info",
            f"predicted optimum: {choice.draft} window {choice.window} "
            f"(predicted TPOT {choice.tpot_s * 1e3:.2f} ms on the mix); confirming",
        )
        self.run_cells([Cell(choice.draft, choice.window, level)], runner, result, phase="predict: confirm")

    # ---- analysis ----
    def prediction(self) -> SweepPrediction:
        """Predictions from the largest measured window per draft; compared with every measured window."""
        from spectrn.sweep.predict import StepPoint, compare_prediction, fit_costs, mix_prediction, predict_tpot
        from spectrn.sweep.recommend import build_matrix, default_mix

        level = self.levels[0]
        cells = [c for c in cell_inputs(self.sweep_dir, self.manifest) if c.level == level]
        if not cells:
            return SweepPrediction()
        rows = build_matrix(cells)
        weights = self.opts.weights or default_mix(rows)
        out: dict[str, Any] = {"level": level, "weights": weights, "drafts": {}, "choice": None, "comparison": []}
        candidates = sorted(self.opts.windows)
        best: tuple[float, int, str] | None = None
        for draft in sorted({c.draft for c in cells}):
            mine = [c for c in cells if c.draft == draft]
            big = max(mine, key=lambda c: c.window)
            k = big.window
            semantics = big.semantics
            per_cls: dict[str, Any] = {}
            base_tpot: dict[str, float] = {}
            notes: list[str] = []
            for cls, cs in sorted(big.view.by_prompt_class.items()):
                b, sv = cs.variants.get("baseline"), cs.variants.get("speculative")
                tb = b.tpot_s.p50 if b else None
                ts = sv.tpot_s.p50 if sv else None
                acc = sv.acceptance if sv else None
                length = acc.mean_accepted_length if acc else None
                if not (tb and ts and length and acc and acc.per_position):
                    notes.append(f"{cls}: not enough data in the window-{k} run")
                    continue
                try:
                    fit = fit_costs([StepPoint(0, tb, 1.0, "baseline"), StepPoint(k, ts, length, window_label(k))])
                    p = predict_tpot(
                        acc.per_position, fit, windows=range(1, k + 1), baseline_tpot_s=tb, semantics=semantics
                    )
                except AnalysisError as e:
                    notes.append(f"{cls}: {e.message}")
                    continue
                per_cls[cls] = p
                base_tpot[cls] = tb
            if not per_cls:
                out["drafts"][draft] = {"measured_window": k, "notes": notes}
                continue
            usable = {c: x for c, x in weights.items() if c in per_cls}
            if not usable:
                notes.append("none of the mix's classes could be predicted")
                out["drafts"][draft] = {"measured_window": k, "notes": notes}
                continue
            mix = mix_prediction(per_cls, usable, base_tpot)
            cand = [w for w in candidates if w <= k] or list(range(1, k + 1))
            k_best = min(cand, key=lambda w: (round(mix["tpot_s"][w], 12), w))
            out["drafts"][draft] = {
                "measured_window": k,
                "by_class": {c: p.to_dict() for c, p in per_cls.items()},
                "mix": {
                    **mix,
                    "tpot_s": {str(w): v for w, v in mix["tpot_s"].items()},
                    "speedup": {str(w): v for w, v in mix["speedup"].items()},
                },  # fmt: skip
                "best_window": k_best,
                "notes": notes,
            }
            refined = self._refined(mine, per_cls, base_tpot, usable, cand, semantics)
            if refined:
                out["drafts"][draft]["refined"] = refined
            key = (mix["tpot_s"][k_best], k_best, draft)
            if best is None or key < best:
                best = key
            # prediction vs measurement for every window of this draft measured at this level
            for cls, p in per_cls.items():
                measured = {}
                for c in mine:
                    part = c.view.by_prompt_class.get(cls)
                    sv = part.variants.get("speculative") if part else None
                    if sv is not None and sv.tpot_s.p50:
                        measured[c.window] = sv.tpot_s.p50
                for row in compare_prediction(p.tpot_s, measured):
                    out["comparison"].append({"draft": draft, "prompt_class": cls, **row,
                                              "from_window": k, "fitted": row["window"] == k})  # fmt: skip
        if best is not None:
            out["choice"] = {"draft": best[2], "window": best[1], "tpot_s": best[0]}
        return SweepPrediction.model_validate(finite(out))

    @staticmethod
    def _refined(
        mine: Sequence[CellInput],
        predictions: dict[str, Any],
        base_tpot: dict[str, float],
        weights: dict[str, float],
        candidates: Sequence[int],
        semantics: WindowSemantics,
    ) -> dict[str, Any] | None:
        """Once a second window is measured (the confirmation), refit the cost line through every measured
        step of this draft (baseline + each window) and predict again from the same per-position acceptance."""
        from spectrn.sweep.predict import StepPoint, fit_costs, mix_prediction, predict_tpot

        if len({c.window for c in mine}) < 2:
            return None
        refined: dict[str, Any] = {}
        for cls, p in predictions.items():
            pts = []
            for c in mine:
                part = c.view.by_prompt_class.get(cls)
                b = part.variants.get("baseline") if part else None
                sv = part.variants.get("speculative") if part else None
                tb = b.tpot_s.p50 if b else None
                ts = sv.tpot_s.p50 if sv else None
                length = sv.acceptance.mean_accepted_length if sv and sv.acceptance else None
                if tb:
                    pts.append(StepPoint(0, tb, 1.0, "baseline"))
                if ts and length:
                    pts.append(StepPoint(c.window, ts, length, window_label(c.window)))
            try:
                fit = fit_costs(pts)
                refined[cls] = predict_tpot(
                    p.per_position, fit, baseline_tpot_s=base_tpot.get(cls), semantics=semantics
                )
            except AnalysisError:
                continue
        usable = {c: w for c, w in weights.items() if c in refined}
        if not usable:
            return None
        mix = mix_prediction(refined, usable, base_tpot)
        k_best = min(candidates, key=lambda w: (round(mix["tpot_s"][w], 12), w))
        return {
            "windows_in_fit": sorted({c.window for c in mine}),
            "best_window": k_best,
            "mix_tpot_s": {str(w): v for w, v in mix["tpot_s"].items()},
            "cost": {c: p.cost.to_dict() for c, p in refined.items()},
        }

    def analyze(self) -> SweepAnalysis:
        """The analysis of every finished cell, written to ``analysis.json`` (the ``SweepAnalysis`` contract)."""
        from spectrn.sweep.recommend import analyze_sweep

        cells = cell_inputs(self.sweep_dir, self.manifest)
        if not cells:
            raise AnalysisError(f"sweep {self.sweep_id} has no finished cell", hint="run `spectrn sweep` first")
        analysis = analyze_sweep(
            cells, weights=self.opts.weights, min_gain=self.opts.min_gain, objective=self.opts.objective
        )
        analysis["sweep_id"] = self.sweep_id
        analysis["settings"] = self.manifest.model.settings.model_dump()
        analysis["equivalence"] = aggregate_equivalence(cells)
        analysis["cells"] = [
            {"key": c.key, "run_dir": e.run_dir, "duration_s": e.duration_s, "clean": e.clean}
            for c, e in self.manifest.finished_cells()
        ]
        # Also for a full grid: predicting every window from the largest one, next to what was measured, shows
        # how far --predict can be trusted on this workload before the next sweep relies on it.
        analysis["prediction"] = self.prediction().model_dump()
        # NaN/Inf (a ratio over an empty class) become null first: the contract is strict JSON.
        model = SweepAnalysis.model_validate(finite(analysis))
        data = finite(model.model_dump(mode="json"))
        atomic_write_text(self.sweep_dir / ANALYSIS, json.dumps(data, indent=2, allow_nan=False) + "\n")
        return model


ANALYSIS = "analysis.json"


def _stale_runs(out_root: Path, cell: Cell, runner: CellRunner) -> Iterator[Path]:
    """Unfinished run folders of ``cell`` (the caller only asks for cells the manifest lacks)."""
    if not out_root.is_dir():
        return
    for child in out_root.iterdir():
        if not child.is_dir():
            continue
        if child.name == runner.run_id(cell):
            yield child
