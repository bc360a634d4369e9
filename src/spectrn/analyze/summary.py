"""Request records -> ``Summary``: one pass into accumulators, then per load level its figures and findings.

The records are read once (pure, apart from reading the records given) into an ``Accumulator`` per (load
level, variant, prompt class) (``spectrn.analyze.accumulator``); each level then gets its variants'
statistics (``variant``), speedups (``speedups``), greedy-output equivalence (``equivalence``) and findings
(``findings``); the run gets its verdict, headline (``headline``) and provenance (``provenance``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spectrn.analyze.acceptance import combine, counters_from_json
from spectrn.analyze.accumulator import Accumulator, _arr
from spectrn.analyze.equivalence import OutputComparer
from spectrn.analyze.findings import _level_findings, _verdict
from spectrn.analyze.headline import _headline
from spectrn.analyze.provenance import _stack_notice, _with_semantics, config_label, load_shape_text
from spectrn.analyze.settings import Settings
from spectrn.analyze.shares import level_share
from spectrn.analyze.speedups import _bills, speedups
from spectrn.analyze.variant import variant_summary
from spectrn.errors import AnalysisError
from spectrn.run.measured import measured, scheduling_differs
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import ClassSummary, Finding, LevelSummary, Load, Summary


def accumulate(
    records: Iterable[RequestRecord], st: Settings, comparer: OutputComparer | None = None
) -> dict[tuple[str, str, str], Accumulator]:
    """One pass over the measured records: an ``Accumulator`` per (level, variant, prompt class)."""
    accs: dict[tuple[str, str, str], Accumulator] = {}
    for rec in records:
        if rec.warmup:
            continue
        key = (rec.level, rec.variant, rec.prompt_class)
        acc = accs.get(key)
        if acc is None:
            window = st.window if rec.variant != "baseline" else 1
            semantics = st.semantics if window != 1 else "nxdi"
            acc = accs[key] = Accumulator(window=window, semantics=semantics, seed=st.seed)
        acc.add(rec, st.time_scale, st.max_tokens)
        if comparer is not None:
            comparer.add(rec)
    return accs


def summarize(
    records: Iterable[RequestRecord],
    meta: RunMeta,
    *,
    acceptance: Mapping[str, Any] | None = None,
    mix: Mapping[str, float] | None = None,
    seed: int = 0,
) -> Summary:
    """The run's ``Summary`` from its records (one pass) and its counter deltas (``acceptance.json``)."""
    st = Settings.of(meta, seed, acceptance)
    comparer = OutputComparer()
    accs = accumulate(records, st, comparer)
    if not accs:
        raise AnalysisError(
            f"run {meta.run_id} has no measured requests", hint="the run was interrupted before any request finished"
        )
    counters = acceptance or {}
    levels = sorted({k[0] for k in accs}, key=lambda lv: Load.parse(lv).sort_key())
    findings: list[Finding] = []
    level_summaries = [_level(lv, accs, st, meta, counters, comparer, findings, seed) for lv in levels]
    if meta.interrupted:
        findings.append(
            Finding(code="interrupted", severity="error", message="the run was interrupted; statistics cover "
                    "the requests that finished")
        )  # fmt: skip
    elif meta.finished_at is None:
        findings.append(
            Finding(
                code="unfinished",
                severity="error",
                message="the run never finished (run.json has no end time: the load generator was killed or is "
                "still running); statistics cover the requests that finished",
            )
        )
    for note in meta.notes:
        if note.startswith("wall clock stepped"):  # written by the load generator (loadgen/clock.py)
            findings.append(Finding(code="wall_clock_step", severity="warning", message=note))
    changed = [n for n in meta.read_notes if n.startswith("run.json ") and ": " in n]
    if changed:
        findings.append(
            Finding(
                code="recorded_config",
                severity="warning",
                message="this run was recorded by another spectrn version; read as history: " + "; ".join(changed),
            )
        )
    for note in meta.read_notes:
        if note.startswith("requests.jsonl: skipped"):  # run/records.py: what a killed or crashed writer left
            findings.append(Finding(code="records_skipped", severity="warning", message=note))
    provenance = meta.provenance.model_copy(
        update={"rescaled": st.time_scale != 1.0, "engine": meta.engine, "load_shape": load_shape_text(meta)}
    )
    provenance = _with_semantics(provenance, meta, acceptance, findings)
    contradiction = measured(meta.config, provenance).finding()
    if contradiction:  # what the run measured is not what its config says: first, before any figure is read
        findings.insert(0, Finding(code="config_contradiction", severity="warning", message=contradiction))
    stack = _stack_notice(meta, provenance)
    if stack:
        findings.append(Finding(code="unsupported_stack", severity="warning", message=stack))
    scheduling = scheduling_differs(provenance)
    if scheduling:
        findings.append(Finding(code="scheduling_differs", severity="warning", message=scheduling))
    if st.time_scale != 1.0:
        findings.append(
            Finding(
                code="time_scale",
                severity="note",
                message=f"simulated at time scale {st.time_scale:g}: every figure is rescaled to real time "
                f"(durations divided by {st.time_scale:g})",
            )
        )
    verdict = _verdict(provenance, level_summaries, findings)
    sends = [a.first_send for a in accs.values() if a.completed]
    ends = [a.last_end for a in accs.values() if a.completed]
    headline = _headline(level_summaries, mix)
    return Summary(
        run_id=meta.run_id,
        model=meta.model,
        config_label=config_label(meta),
        provenance=provenance,
        verdict=verdict,
        findings=findings,
        headline=headline,
        mix=dict(mix) if mix else None,
        levels=level_summaries,
        time_range=(min(sends), max(ends)) if sends else None,
        notes=[*meta.notes, *meta.read_notes],
    )


def _level(
    lv: str,
    accs: dict[tuple[str, str, str], Accumulator],
    st: Settings,
    meta: RunMeta,
    counters: Mapping[str, Any],
    comparer: OutputComparer,
    findings: list[Finding],
    seed: int,
) -> LevelSummary:
    keys = [k for k in accs if k[0] == lv]
    order = {"baseline": 0, "speculative": 1}
    variants = sorted({k[1] for k in keys}, key=lambda v: (order.get(v, 2), v))
    classes = sorted({k[2] for k in keys})
    pooled: dict[str, Accumulator] = {}
    for v in variants:
        like = accs[next((lv, v, c) for c in classes if (lv, v, c) in accs)]  # a class may lack this variant
        acc = Accumulator(window=like.window, semantics=like.semantics, seed=seed)
        for c in classes:
            if (lv, v, c) in accs:
                acc.merge(accs[(lv, v, c)])
        pooled[v] = acc

    def acceptance_of(acc: Accumulator, v: str, with_counters: bool) -> Any:
        if v == "baseline" or acc.stream is None:
            return None
        stream = acc.stream.result(seed=seed + 50)
        raw = counters.get(f"{v}@{lv}", counters.get(v)) if with_counters else None
        return combine(stream, counters_from_json(raw))

    out = LevelSummary(load=Load.parse(lv))
    for v in variants:
        planned = meta.planned.get(v, {}).get(lv)
        by_class = {c: accs[(lv, v, c)].itl for c in classes if (lv, v, c) in accs}
        out.variants[v] = variant_summary(
            pooled[v], st, planned=planned, acceptance=acceptance_of(pooled[v], v, True), itl_by_class=by_class
        )
    # a class of a mixed level has no wall of its own: its figures are shares of the level's (analyze/shares.py)
    shares = {
        v: level_share(_arr(pooled[v].ttft), _arr(pooled[v].e2e), out.variants[v].duration_s) for v in variants
    } if len(classes) > 1 else {}  # fmt: skip
    for c in classes:
        cs = ClassSummary()
        for v in variants:
            if (lv, v, c) in accs:
                a = accs[(lv, v, c)]
                cs.variants[v] = variant_summary(
                    a, st, planned=None, acceptance=acceptance_of(a, v, False), share=shares.get(v), scope_class=c,
                )  # fmt: skip
        if (lv, "baseline", c) in accs and (lv, "speculative", c) in accs:
            cs.speedup = speedups(
                accs[(lv, "baseline", c)], accs[(lv, "speculative", c)], paired=st.paired, seed=seed,
                walls=(cs.variants["baseline"].duration_s, cs.variants["speculative"].duration_s),
                bills=_bills(cs) if shares else None,
            )  # fmt: skip
        out.by_prompt_class[c] = cs
    if "baseline" in pooled and "speculative" in pooled:
        out.speedup = speedups(
            pooled["baseline"], pooled["speculative"], paired=st.paired, seed=seed,
            walls=(out.variants["baseline"].duration_s, out.variants["speculative"].duration_s),
        )  # fmt: skip
        out.equivalence = comparer.result(lv)
        eq = out.equivalence
        if eq is not None and eq.compared and eq.matched < eq.compared:
            first = eq.divergences[0].index if eq.divergences else "?"
            findings.append(
                Finding(
                    code="divergence",
                    severity="warning",
                    level=lv,
                    message=f"OUTPUT DIVERGENCE: {eq.compared - eq.matched} of {eq.compared} greedy outputs differ "
                    f"between baseline and speculative (first at index {first})",
                )
            )
    _level_findings(lv, out, st, findings)
    for v in variants:
        if pooled[v].token_warnings:
            findings.append(
                Finding(
                    code="token_mismatch",
                    severity="warning",
                    level=lv,
                    message=f"{v}: {pooled[v].token_warnings} request(s) where the server's token_ids and usage "
                    f"disagree (token_ids counted), e.g. {pooled[v].token_warning_example}",
                )
            )
    return out
