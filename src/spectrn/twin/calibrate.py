"""Run folders -> a twin: step costs, acceptance and window semantics fitted to what the client measured.

Any run folder works: the simulator, vLLM on CPU, a trn2 run collected from a cluster. What it needs is in
every run: the records (``sent_at``, event times, tokens per event, prompt tokens), the summary's per-class
stream acceptance, and the run's provenance (server profile, window and its semantics, time scale). The runs
should share one draft and one window semantics; they may differ in window (two windows separate the draft's
cost from the verify pass's growth better than one) and in load levels (two or three levels with different
batch sizes separate the per-sequence and per-token terms, and a level where the speculative step is compute
bound identifies the compute slope).

The result is a ``spectrn.sim.model.Preset`` with the fitted values (``spectrn sim serve --preset-file``) and
its ``Calibration`` sidecar (``spectrn.twin.model``). Methods: ``spectrn.twin.steps`` (steps from events),
``spectrn.twin.costs`` (step costs), ``spectrn.twin.acceptance`` (acceptance); the limits: docs/twin.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spectrn.configuration.catalog import MODELS
from spectrn.configuration.config import SpectrnConfig
from spectrn.dialects import semantics_of, semantics_of_profile
from spectrn.errors import AnalysisError, ConfigError
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Summary
from spectrn.sim.model import (
    PRESETS,
    REFERENCE_DRAFT_PARAMS_B,
    AcceptanceClass,
    AcceptanceModel,
    CostModel,
    DraftParams,
    Preset,
    draft_params,
    predictability,
)
from spectrn.sim.profiles import profiles
from spectrn.twin.acceptance import ClassCounts, fallback_alphas, fit_decay, shrunk
from spectrn.twin.costs import PARAMS, CostFit, StepSet, fit_costs
from spectrn.twin.model import (
    Calibration,
    ClassFit,
    Covariance,
    Decay,
    ParamFit,
    Pricing,
    Regime,
    ResidualGroup,
    Residuals,
    RunSource,
    Twin,
    Workload,
)
from spectrn.twin.steps import timeline
from spectrn.windows import WindowSemantics, draft_runs, verified_tokens

BASELINE = "baseline"
SPECULATIVE = "speculative"
SAMPLE_POINTS = 400
POOR_FIT = 0.10  # a median segment residual above this is a poor fit, and the twin says so


@dataclass
class _Run:
    folder: RunFolder
    summary: Summary
    window: int
    semantics: WindowSemantics
    draft: str
    profile: str | None
    time_scale: float
    source: RunSource
    sets: list[StepSet] = field(default_factory=list)


def _open_run(path: Path) -> _Run:
    from spectrn.analyze.run import ensure_summary

    folder = RunFolder.open(path)
    summary = ensure_summary(folder)
    meta = folder.meta
    prov = summary.provenance
    variants = set(summary.variant_names)
    if not {BASELINE, SPECULATIVE} <= variants:
        raise ConfigError(
            f"run {folder.run_id} has variants {', '.join(sorted(variants)) or 'none'}; a twin needs 'baseline' "
            "and 'speculative'",
            hint="calibrate from an A/B run of spectrn bench (endpoints named baseline and speculative)",
        )
    server = prov.servers.get(SPECULATIVE)
    window = server.window if server is not None else None
    if window is None:
        raise ConfigError(
            f"run {folder.run_id}: the speculative server's window is unknown",
            hint="bench with the window declared (spectrn bench --endpoint ... --window K), or from a runtime "
            "spectrn started",
        )
    if server is not None and server.window_semantics is not None:
        semantics: WindowSemantics = server.window_semantics
    elif prov.profile:
        semantics = semantics_of_profile(prov.profile)
    else:
        semantics = semantics_of(meta.config.vllm_dialect, meta.config.plugin_release)
    draft = (server.draft if server is not None else None) or meta.config.draft
    levels = [lv.label for lv in summary.levels]
    source = RunSource(
        run_id=folder.run_id,
        path=str(folder.path),
        runtime=prov.runtime,
        profile=prov.profile or (server.profile if server is not None else None),
        time_scale=prov.time_scale,
        draft=draft,
        window=window,
        semantics=semantics,
        levels=levels,
        performance=summary.verdict.performance,
        reasons=list(summary.verdict.reasons),
    )
    return _Run(folder, summary, window, semantics, draft, source.profile, prov.time_scale, source)


def _steps(run: _Run) -> None:
    records = list(run.folder.records(measured=False))
    for variant in (BASELINE, SPECULATIVE):
        tl = timeline(records, variant, time_scale=run.time_scale)
        spec = variant == SPECULATIVE
        run.sets.append(
            StepSet(
                run=run.folder.run_id,
                variant=variant,
                draft_runs=draft_runs(run.semantics, run.window) if spec else 0,
                verified=verified_tokens(run.semantics, run.window) if spec else 1,
                steps=tl.steps,
            )
        )
        run.source.steps[variant] = len(tl.steps)
        run.source.dropped[variant] = dict(tl.dropped)
        if not tl.prompt_tokens_known:
            run.source.reasons.append(f"{variant}: some records lack prompt_tokens (context counts are low)")


def _class_texts(prompts: str, cfg: SpectrnConfig) -> dict[str, list[str]]:
    """The texts of each prompt class as the runs sent them (any workload format; a conversation's later turns
    under their own class, as the load generator reports them)."""
    from spectrn.loadgen.prompts import turn_class
    from spectrn.loadgen.workloads import load_workload

    texts: dict[str, list[str]] = {}
    prompt_set, _ = load_workload(prompts, cfg.bench.workload, seed=cfg.bench.seed)
    for p in prompt_set.prompts:
        texts.setdefault(p.prompt_class, []).append(p.text)
        for n, turn in enumerate((p.turns or [])[1:], 2):
            texts.setdefault(turn_class(p.prompt_class, n), []).append(turn)
    return texts


def calibrate(
    run_dirs: Sequence[Path],
    *,
    prompts: str | None = None,
    base: Preset | None = None,
    name: str | None = None,
) -> Twin:
    """Fit a twin to ``run_dirs`` (see the module docstring). ``prompts``: the prompt set the runs used, when
    their config names a file this machine does not have; ``base``: the preset whose values stand in for what
    the runs cannot identify (default ``qwen3-32b-trn2``)."""
    import numpy as np

    from spectrn import __version__

    if not run_dirs:
        raise ConfigError(
            "no run folder given", hint="spectrn twin calibrate RUN_DIR [RUN_DIR ...] --out-file twin.yaml"
        )
    runs = [_open_run(Path(p)) for p in run_dirs]
    drafts = {r.draft for r in runs}
    sems = {r.semantics for r in runs}
    if len(drafts) > 1 or len(sems) > 1:
        raise ConfigError(
            f"the runs mix drafts ({', '.join(sorted(drafts))}) or window semantics ({', '.join(sorted(sems))})",
            hint="a twin models one draft on one kind of server: calibrate each separately",
        )
    draft, semantics = runs[0].draft, runs[0].semantics
    base = base or PRESETS["qwen3-32b-trn2"]
    notes: list[str] = []
    if draft not in MODELS:
        notes.append(f"draft {draft!r} is not in the catalog: the twin names it {base.default_draft!r}")
    draft_key = draft if draft in MODELS else base.default_draft
    prior_draft = draft_params(base, draft_key)
    prior = {
        "weights_read_s": base.cost.weights_read_s,
        "kv_read_per_seq_s": base.cost.kv_read_per_seq_s,
        "kv_read_per_token_s": base.cost.kv_read_per_token_s,
        "compute_per_token_s": base.cost.compute_per_token_s,
        "draft_run_s": prior_draft.run_s,
        "draft_kv_read_per_token_s": prior_draft.kv_read_per_token_s,
        "prefill_base_s": base.cost.prefill_base_s,
        "prefill_per_token_s": base.cost.prefill_per_token_s,
    }
    for r in runs:
        _steps(r)
    from threadpoolctl import threadpool_limits

    # The profile's hundreds of least-squares solves are tall and thin (segments x at most 8 terms): BLAS split over
    # threads makes each wait for a core on a busy machine (13.9 s instead of 0.24 s for 6,300 steps on a loaded
    # 2-core machine, docs/twin.md) and gives the same answer, so they run in one thread.
    with threadpool_limits(limits=1, user_api="blas"):
        fit = fit_costs([s for r in runs for s in r.sets], prior)

    # ---- acceptance -------------------------------------------------------------------------------------
    counts: dict[str, ClassCounts] = {}
    agreements: list[str] = []
    for r in runs:
        for lv in r.summary.levels:
            spec = lv.variants.get(SPECULATIVE)
            if spec is not None and spec.acceptance is not None and spec.acceptance.agreement:
                agreements.append(f"{r.folder.run_id}/{lv.label}: {spec.acceptance.agreement}")
            for cls, cs in lv.by_prompt_class.items():
                vs = cs.variants.get(SPECULATIVE)
                stream = vs.acceptance.stream if vs is not None and vs.acceptance is not None else None
                if stream is None or not stream.steps:
                    continue
                counts.setdefault(cls, ClassCounts(cls)).add(
                    stream.per_position, stream.steps, f"{r.folder.run_id}/{lv.label} window {r.window}"
                )
    if not counts:
        raise AnalysisError(
            "no per-class stream acceptance in the runs' summaries",
            hint="the speculative variant needs decode events with token counts (token_ids or continuous usage)",
        )
    decay = fit_decay(
        list(counts.values()),
        cap=base.acceptance.accept_cap,
        prior_tau=base.acceptance.decay_tau,
        prior_gamma=base.acceptance.decay_gamma,
    )
    if decay.note:
        notes.append(decay.note)
    notes += [f"acceptance, stream vs counters: {a}" for a in agreements]

    # ---- workload (what the runs sent) ------------------------------------------------------------------
    requests_per_class: dict[str, int] = {}
    prompt_tokens: dict[str, list[int]] = {}
    for r in runs:
        for rec in r.folder.records():
            if rec.variant != BASELINE:
                continue
            requests_per_class[rec.prompt_class] = requests_per_class.get(rec.prompt_class, 0) + 1
            if rec.prompt_tokens is not None:
                prompt_tokens.setdefault(rec.prompt_class, []).append(rec.prompt_tokens)
    total = sum(requests_per_class.values()) or 1
    mix = {c: n / total for c, n in sorted(requests_per_class.items())}
    mean_prompt = {c: float(np.mean(v)) for c, v in sorted(prompt_tokens.items())}
    cfg = runs[0].folder.meta.config
    prompt_set = prompts or cfg.bench.prompts
    try:
        texts = _class_texts(prompt_set, cfg)
    except ConfigError as e:
        raise ConfigError(
            f"the runs' prompt set {prompt_set!r} cannot be read here ({e.message}); a twin matches prompts to "
            "classes by their text",
            hint="pass the prompt file the runs used: --prompts FILE",
        ) from None
    pred = {c: float(np.mean([predictability(t) for t in texts[c]])) for c in counts if texts.get(c)}
    missing = sorted(c for c in counts if not texts.get(c))
    if missing:
        raise ConfigError(
            f"prompt set {prompt_set!r} has no prompt of class(es) {', '.join(missing)} that the runs measured",
            hint="pass the prompt file the runs used: --prompts FILE",
        )
    fallback = fallback_alphas(decay.alphas, pred, mix)
    if fallback is None:
        notes.append(
            "prompts of no measured class use the base preset's predictability rule (fewer than two classes of "
            "distinct predictability to fit it)"
        )
        a_open, a_struct = base.acceptance.alpha_open, base.acceptance.alpha_structured
    else:
        a_open, a_struct = fallback

    classes: list[ClassFit] = []
    acc_classes: list[AcceptanceClass] = []
    for cls, c in sorted(counts.items()):
        probs, ses = c.conditional()
        windows = {r.window for r in runs}
        alpha = min(1.0, decay.alphas[cls])
        table = shrunk(c, alpha, decay.tau, decay.gamma, base.acceptance.accept_cap)
        acc_classes.append(AcceptanceClass(name=cls, contains=texts[cls], position_probs=table, alpha=alpha))
        mal = 1.0
        run_p = 1.0
        for p in probs:
            run_p *= p
            mal += run_p
        classes.append(
            ClassFit(
                name=cls,
                position_probs=probs,
                position_se=ses,
                reached=[int(round(n)) for n in c.reached[: len(probs)]],
                alpha=decay.alphas[cls],
                mean_accepted_length=mal,
                window=max(windows),
                semantics=semantics,
                share=mix.get(cls, 0.0),
                prompt_tokens=mean_prompt.get(cls, 0.0),
                predictability=pred.get(cls),
                prompts=len(texts[cls]),
                sources=c.sources,
            )
        )

    # ---- the preset -------------------------------------------------------------------------------------
    v = {k: p.value for k, p in fit.params.items()}
    ratio = MODELS[draft_key].params_b / REFERENCE_DRAFT_PARAMS_B
    cost = CostModel(
        prefill_base_s=v["prefill_base_s"],
        prefill_per_token_s=v["prefill_per_token_s"],
        weights_read_s=max(v["weights_read_s"], 1e-9),
        kv_read_per_seq_s=v["kv_read_per_seq_s"],
        kv_read_per_token_s=v["kv_read_per_token_s"],
        compute_per_token_s=v["compute_per_token_s"],
        ref_draft_run_s=v["draft_run_s"] / math.sqrt(ratio),
    )
    acceptance = AcceptanceModel(
        alpha_structured=a_struct,
        alpha_open=a_open,
        decay_tau=decay.tau,
        decay_gamma=decay.gamma,
        accept_cap=base.acceptance.accept_cap,
        temperature_penalty=base.acceptance.temperature_penalty,
        classes=acc_classes,
    )
    profile = runs[0].profile if runs[0].profile in profiles() else None
    if profile is None or profiles()[profile].window != semantics:
        profile = "upstream" if semantics == "upstream" else "neuron-fork"
    target = cfg.target if cfg.target in MODELS else base.target
    observed_batch = max((s.decode for r in runs for st in r.sets for s in st.steps), default=1)
    max_num_seqs = max(cfg.max_num_seqs, observed_batch)
    if observed_batch > cfg.max_num_seqs:
        notes.append(f"batches of {observed_batch} observed above the config's max_num_seqs {cfg.max_num_seqs}")
    ids = ", ".join(r.folder.run_id for r in runs)
    preset = Preset(
        name=name or f"twin-{runs[0].folder.run_id}"[:100],
        description=f"Digital twin fitted by spectrn twin calibrate from run(s) {ids}",
        target=target,
        profile=profile,
        default_draft=draft_key,
        default_window=max(r.window for r in runs),
        max_num_seqs=max_num_seqs,
        max_model_len=cfg.max_model_len,
        cost=cost,
        acceptance=acceptance,
        drafts={
            draft_key: DraftParams(
                quality=1.0,
                run_s=v["draft_run_s"],
                kv_read_per_token_s=v["draft_kv_read_per_token_s"],
                compute_per_token_s=prior_draft.compute_per_token_s,
            )
        },
    )

    # ---- the sidecar ------------------------------------------------------------------------------------
    from spectrn.configuration.catalog import INSTANCES

    inst = INSTANCES.get(cfg.instance_type)
    hourly = cfg.pricing.instance_hourly_usd or (inst.hourly_usd if inst else INSTANCES["trn2.48xlarge"].hourly_usd)
    performance = all(r.source.performance for r in runs)
    reasons = sorted({f"{r.folder.run_id}: {why}" for r in runs for why in r.summary.verdict.reasons})
    calibration = Calibration(
        created_at=time.time(),
        spectrn_version=__version__,
        performance=performance,
        reasons=reasons,
        draft=draft_key,
        semantics=semantics,
        runs=[r.source for r in runs],
        costs={
            k: ParamFit(value=p.value, se=p.se, status=p.status, note=p.note, points=p.points)
            for k, p in fit.params.items()
        },
        cost_covariance=Covariance(names=fit.free, matrix=fit.covariance),
        regime=Regime(
            steps=fit.observations,
            segments=fit.segments,
            compute_bound_steps=fit.compute_bound_steps,
            residual_scale_s=fit.residual_scale_s,
        ),
        acceptance=classes,
        decay=Decay(
            tau=decay.tau,
            gamma=decay.gamma,
            identified=decay.identified,
            note=decay.note,
            covariance=Covariance(names=decay.names, matrix=decay.covariance if decay.identified else []),
        ),
        residuals=_residuals(fit),
        workload=Workload(
            max_tokens=cfg.bench.max_tokens,
            temperature=cfg.bench.temperature,
            api=cfg.bench.api,
            requests=cfg.bench.requests,
            prompts=prompt_set,
            warmup=cfg.bench.warmup,
            seed=cfg.bench.seed,
            mix=mix,
            prompt_tokens=mean_prompt,
        ),
        pricing=Pricing(
            instance_type=cfg.instance_type,
            hourly_usd=float(hourly),
            instances_per_service=cfg.pricing.instances_per_service,
        ),
        notes=notes,
    )
    res = calibration.residuals
    if res.segment_median_abs_rel > POOR_FIT:
        calibration.notes.append(
            f"the simulator's model fits these runs poorly (median segment residual {res.segment_median_abs_rel:.0%}): "
            "predictions from this twin carry that error beyond their intervals"
        )
    if cfg.bench.temperature > 0:
        calibration.notes.append(
            f"the runs sampled at temperature {cfg.bench.temperature:g}: the measured acceptance is at that "
            "temperature, and the twin divides it again by the temperature penalty when sampling"
        )
    return Twin(
        preset=preset.model_copy(update={"calibration": calibration.model_dump(mode="json")}), calibration=calibration
    )


def _residuals(fit: CostFit) -> Residuals:
    import numpy as np

    obs, fitted = np.asarray(fit.observed), np.asarray(fit.fitted)
    rel = (obs - fitted) / np.where(obs > 0, obs, np.nan)
    so = fit.segment_observed
    seg = (so - fit.segment_fitted) / np.where(so > 0, so, np.nan)
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row, value in zip(fit.rows, rel, strict=True):
        groups.setdefault((row[0], row[1], row[2]), []).append(float(value))
    out = []
    for (run, variant, level), values in sorted(groups.items()):
        arr = np.asarray(values)
        arr = arr[np.isfinite(arr)]
        if arr.size:
            out.append(
                ResidualGroup(
                    run=run,
                    variant=variant,
                    level=level,
                    steps=int(arr.size),
                    median_rel=float(np.median(arr)),
                    p90_abs_rel=float(np.percentile(np.abs(arr), 90)),
                )
            )
    rng = np.random.default_rng(0)
    pick = np.sort(rng.choice(obs.size, size=min(SAMPLE_POINTS, obs.size), replace=False))
    sample = [
        [
            1.0 if fit.rows[i][5] else 0.0,
            float(fit.rows[i][3]),
            float(fit.rows[i][4]),
            float(fit.rows[i][6]),
            round(float(obs[i]), 7),
            round(float(fitted[i]), 7),
        ]
        for i in pick
    ]
    finite = rel[np.isfinite(rel)]
    seg_f = seg[np.isfinite(seg)]
    return Residuals(
        step_p90_abs_rel=float(np.percentile(np.abs(finite), 90)) if finite.size else 0.0,
        step_median_abs_rel=float(np.median(np.abs(finite))) if finite.size else 0.0,
        segment_p90_abs_rel=float(np.percentile(np.abs(seg_f), 90)) if seg_f.size else 0.0,
        segment_median_abs_rel=float(np.median(np.abs(seg_f))) if seg_f.size else 0.0,
        groups=out,
        sample=sample,
    )


def summary_lines(twin: Twin) -> list[str]:
    """What calibrate found, as plain lines for the CLI (values with standard errors and their status)."""
    cal = twin.calibration
    lines = []
    for name in PARAMS:
        p = cal.costs[name]
        se = f" ± {p.se:.3g}" if p.se is not None else ""
        note = f"  ({p.note})" if p.note else ""
        lines.append(f"{name:27s} {p.value:.4g}{se} s  [{p.status}, {p.points} steps]{note}")
    for c in cal.acceptance:
        probs = ", ".join(f"{p:.3f}" for p in c.position_probs)
        lines.append(
            f"acceptance {c.name}: alpha {c.alpha:.3f}; conditional per position [{probs}]; "
            f"mean accepted length {c.mean_accepted_length:.3f} at window {c.window}"
        )
    d = cal.decay
    lines.append(f"decay: tau {d.tau:.3g}, gamma {d.gamma:.3g} ({'fitted' if d.identified else 'prior'})")
    r = cal.residuals
    lines.append(
        f"residuals |observed - fitted| / observed: per step median {r.step_median_abs_rel:.1%}, p90 "
        f"{r.step_p90_abs_rel:.1%}; per segment median {r.segment_median_abs_rel:.1%}, p90 "
        f"{r.segment_p90_abs_rel:.1%}; {cal.regime.steps} steps, "
        f"{cal.regime.compute_bound_steps} compute bound"
    )
    lines += [f"note: {n}" for n in cal.notes]
    if not cal.performance:
        lines.append("NOT A PERFORMANCE RESULT: " + "; ".join(cal.reasons))
    return lines
