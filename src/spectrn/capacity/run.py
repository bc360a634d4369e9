"""Running a capacity search: every variant's bracket probed through real bench levels, then capacity.json.

Probes are scheduled lowest load first. A load every variant still doubles towards runs as one A/B probe
(both variants, identical traffic); once a variant has failed, a doubling probe of another still runs it too
(up to 4x its first failing load), so both variants are measured at the same loads across the doubling range:
those probes answer "from which load on does speculation stop paying". Bisection probes run only the variants
whose bracket wants that load.

At each variant's capacity (its highest passing probe): output tokens/s per instance and $/M output tokens
(the summary's own cost: instance price x instances_per_service / throughput). Speculative / baseline ratios
of throughput and cost at the two capacities come with a bootstrap interval over the requests of the two
probes (``spectrn.analyze.throughput.ratio_ci``, unpaired: different runs at different loads); the capacity
ratio's range is the two brackets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.capacity.probe import ProbeRun, Target, load_label, run_probe
from spectrn.capacity.search import Bracket, LoadKind, precision_text, requests_per_probe
from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import ConfigError
from spectrn.events import Emitter, OnEvent
from spectrn.labels import iso_utc
from spectrn.run.capacity import (
    Capacity,
    Estimate,
    LoadComparison,
    Price,
    Probe,
    Ratio,
    StopsPaying,
    VariantCapacity,
)

VARIANTS = ("baseline", "speculative")
EXTRA_BEYOND_FAIL = 4.0  # a finished variant joins doubling probes up to this multiple of its first failing load
CAPACITY_FILE = "capacity.json"


@dataclass(frozen=True)
class CapacityOptions:
    kind: LoadKind
    start: float
    maximum: float
    precision: float
    requests: int | None  # --requests: raises the per-probe minimum
    percentiles: tuple[float, ...]
    slos: tuple[str, ...]


def _next_probe(brackets: dict[str, Bracket]) -> tuple[float, list[str], str] | None:
    """The lowest load some bracket wants, the variants to run there, and the phase."""
    wants: dict[str, float] = {}
    for v, b in brackets.items():
        if (x := b.next_load()) is not None:
            wants[v] = x
    if not wants:
        return None
    load = min(wants.values())
    need = [v for v, x in wants.items() if x == load]
    doubling = all(brackets[v].doubling for v in need)
    if not doubling:
        return load, need, "bisection"
    ran = set(need)
    for v, b in brackets.items():
        seen = any(x == load for x, _ in b.history)
        if v not in ran and not seen and b.first_fail is not None and load <= EXTRA_BEYOND_FAIL * b.first_fail:
            ran.add(v)
    return load, [v for v in brackets if v in ran], "doubling"


def search(
    cfg: SpectrnConfig,
    target: Target,
    opts: CapacityOptions,
    folder: Path,
    on_event: OnEvent | None = None,
) -> tuple[list[Probe], dict[str, Bracket], dict[str, ProbeRun]]:
    """Probe until every variant's bracket is within the precision; returns the probes in run order, the
    brackets and each probe's run (keyed by its relative folder)."""
    emit = Emitter(on_event)
    variants = [v for v in VARIANTS if v in target.endpoints]
    brackets = {v: Bracket(opts.kind, opts.start, opts.maximum, opts.precision) for v in variants}
    probes: list[Probe] = []
    runs: dict[str, ProbeRun] = {}
    while (step := _next_probe(brackets)) is not None:
        load, ran, phase = step
        n = requests_per_probe(opts.percentiles, minimum=opts.requests, kind=opts.kind, load=load)
        label = load_label(opts.kind, load)
        run_id = f"p{len(probes) + 1:02d}-{label}" + ("" if len(ran) == len(variants) else f"-{'-'.join(ran)}")
        emit("info", f"probe {len(probes) + 1}: {label} ({phase}) on {', '.join(ran)}, {n} requests each")
        run = run_probe(cfg, target, ran, opts.kind, load, n, out_root=folder / "probes", run_id=run_id,
                        on_event=on_event)  # fmt: skip
        rel = str(run.run_dir.relative_to(folder))
        runs[rel] = run
        for v in ran:
            verdict = run.verdicts[v]
            brackets[v].record(load, verdict.passed)
            emit("info", f"  {v} at {label}: " + ("meets the SLOs" if verdict.passed else
                 "MISSES: " + "; ".join(verdict.reasons)))  # fmt: skip
        probes.append(Probe(load=load, phase=phase, run_dir=rel, verdicts=dict(run.verdicts)))
    return probes, brackets, runs


def _requests_of(run: ProbeRun, variant: str) -> tuple[Any, Any, float] | None:
    """(output tokens, e2e, requests in flight) of a probe's completed requests of ``variant``, real time."""
    import numpy as np

    from spectrn.analyze.metrics import request_metrics
    from spectrn.analyze.throughput import in_flight
    from spectrn.run.folder import RunFolder

    folder = RunFolder.open(run.run_dir)
    scale = folder.meta.provenance.time_scale or 1.0
    tokens, e2e = [], []
    for rec in folder.records():
        if rec.variant != variant:
            continue
        m = request_metrics(rec, scale)
        if m is not None:
            tokens.append(m.output_tokens)
            e2e.append(m.e2e)
    vs = run.summary.levels[0].variants.get(variant) if run.summary.levels else None
    if vs is None or not tokens or not vs.duration_s:
        return None
    e = np.asarray(e2e, dtype=float)
    return np.asarray(tokens, dtype=float), e, in_flight(e, vs.duration_s)


def _ratios(
    caps: dict[str, VariantCapacity], brackets: dict[str, Bracket], runs: dict[str, ProbeRun], seed: int
) -> tuple[Ratio, Ratio, Ratio]:
    from spectrn.analyze.throughput import ratio_ci

    none = Ratio(method="needs both variants with a capacity")
    b, s = caps.get("baseline"), caps.get("speculative")
    if b is None or s is None or b.capacity is None or s.capacity is None:
        return none, none, none
    bb, bs = brackets["baseline"], brackets["speculative"]
    cap_ci = None
    if bb.first_fail is not None and bs.first_fail is not None:
        cap_ci = (s.capacity / bb.first_fail, bs.first_fail / b.capacity)
    cap = Ratio(value=s.capacity / b.capacity, ci95=cap_ci,
                method="speculative capacity / baseline capacity; range: the two search brackets (last pass, "
                       "first fail), not a statistical interval")  # fmt: skip
    bt, st = b.output_tokens_per_s_per_instance.value, s.output_tokens_per_s_per_instance.value
    if not (bt and st) or b.probe is None or s.probe is None:
        return cap, Ratio(method="no throughput at a capacity"), Ratio(method="no throughput at a capacity")
    num, den = _requests_of(runs[s.probe], "speculative"), _requests_of(runs[b.probe], "baseline")
    ci = ratio_ci(num, den, paired=False, seed=seed) if num is not None and den is not None else None
    method = ("each variant at its own capacity: 95% bootstrap over the requests of the two capacity probes, "
              "each resampled on its own with its e2e (spectrn.analyze.throughput)")  # fmt: skip
    thr = Ratio(value=st / bt, ci95=ci, method=method)
    cost = Ratio(
        value=bt / st,
        ci95=(1.0 / ci[1], 1.0 / ci[0]) if ci is not None and ci[0] > 0 else None,
        method="1 / the throughput ratio (one price for both variants); " + method,
    )
    return cap, thr, cost


def _stops_paying(probes: Sequence[Probe], runs: dict[str, ProbeRun]) -> StopsPaying:
    compared = []
    for p in sorted(probes, key=lambda p: p.load):
        if not all(v in p.verdicts for v in VARIANTS):
            continue
        sp = runs[p.run_dir].summary.levels[0].speedup if runs[p.run_dir].summary.levels else None
        agg = sp.aggregate_throughput if sp is not None else None
        tpot = sp.tpot_p50 if sp is not None else None
        compared.append(LoadComparison(
            load=p.load,
            throughput_ratio=Estimate(value=agg.value if agg else None, ci95=agg.ci95 if agg else None),
            usd_per_million_baseline=p.verdicts["baseline"].usd_per_million_output_tokens.value,
            usd_per_million_speculative=p.verdicts["speculative"].usd_per_million_output_tokens.value,
            tpot_speedup=Estimate(value=tpot.value if tpot else None, ci95=tpot.ci95 if tpot else None),
        ))  # fmt: skip
    cost_from = next((c.load for c in compared if c.throughput_ratio.value is not None and
                      c.throughput_ratio.value <= 1.0), None)  # fmt: skip
    tpot_from = next((c.load for c in compared if c.tpot_speedup.value is not None and
                      c.tpot_speedup.value <= 1.0), None)  # fmt: skip
    top = max((c.load for c in compared), default=None)
    note = (
        "speculative $/M is no lower than baseline's (aggregate throughput ratio <= 1, point estimate) from the "
        "lowest such probed load; TPOT: baseline / speculative TPOT p50 <= 1"
        if compared
        else "no load probed with both variants"
    )
    if compared and cost_from is None:
        note += f"; speculation still pays at every load probed with both variants (up to {top:g})"
    return StopsPaying(cost_from=cost_from, tpot_from=tpot_from, compared=compared, note=note)


def _price(cfg: SpectrnConfig) -> Price:
    from spectrn.configuration.catalog import INSTANCES
    from spectrn.configuration.pricing import price_of

    inst = INSTANCES.get(cfg.instance_type)
    catalog = inst.hourly_usd if inst else INSTANCES["trn2.48xlarge"].hourly_usd
    given = cfg.pricing.instance_hourly_usd
    price = price_of(cfg.instance_type, given, cfg.pricing.region, catalog) or price_of(
        cfg.instance_type, None, None, catalog
    )
    assert price is not None  # the built-in region always has a built-in price
    source = price.text()
    if inst is None and not given:
        source += ": the trn2.48xlarge price (the instance type is not in the catalog)"
    return Price(instance_type=cfg.instance_type, instance_hourly_usd=price.hourly_usd,
                 instances_per_service=float(cfg.pricing.instances_per_service), source=source)  # fmt: skip


def _variant(v: str, b: Bracket, probes: Sequence[Probe], share: float) -> VariantCapacity:
    at = next((p for p in probes if p.load == b.capacity and v in p.verdicts and p.verdicts[v].passed), None)
    verdict = at.verdicts[v] if at is not None else None
    thr = verdict.output_tokens_per_s if verdict is not None else Estimate()
    per_inst = Estimate(
        value=thr.value / share if thr.value is not None else None,
        ci95=(thr.ci95[0] / share, thr.ci95[1] / share) if thr.ci95 is not None else None,
    )
    return VariantCapacity(
        capacity=b.capacity,
        capacity_per_instance=b.capacity / share if b.capacity is not None else None,
        first_fail=b.first_fail,
        reached_max=b.reached_max,
        monotone=b.monotone,
        probe=at.run_dir if at is not None else None,
        output_tokens_per_s_per_instance=per_inst,
        usd_per_million_output_tokens=verdict.usd_per_million_output_tokens if verdict else Estimate(),
        tpot_p50_s=verdict.tpot_p50_s if verdict else None,
        ttft_p50_s=verdict.ttft_p50_s if verdict else None,
        probes=sum(1 for p in probes if v in p.verdicts),
    )


def run_capacity(
    cfg: SpectrnConfig,
    target: Target,
    opts: CapacityOptions,
    folder: Path,
    capacity_id: str,
    on_event: OnEvent | None = None,
    *,
    window: int | None = None,
) -> Capacity:
    """The whole search and its result; ``folder`` (``<out-dir>/<id>``) receives the probes and capacity.json.
    ``window``: the speculative server's window when known (for the twin's side-by-side)."""
    from spectrn.paths import atomic_write_text

    if not any(v in target.endpoints for v in VARIANTS):
        raise ConfigError("no baseline or speculative endpoint to search", hint="give --endpoint baseline=URL "
                          "and/or --endpoint speculative=URL, or --local")  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    probes, brackets, runs = search(cfg, target, opts, folder, on_event)
    price = _price(cfg)
    caps = {v: _variant(v, b, probes, price.instances_per_service) for v, b in brackets.items()}
    cap_ratio, thr_ratio, cost_ratio = _ratios(caps, brackets, runs, cfg.bench.seed)
    notes = []
    for v, c in caps.items():
        if c.capacity is None:
            notes.append(f"{v}: the start load {opts.start:g} already misses the SLOs (capacity below it)")
        if c.reached_max:
            notes.append(
                f"{v}: the maximum {opts.maximum:g} still meets the SLOs (capacity at least that: raise --max)"
            )
        if not c.monotone:
            notes.append(f"{v}: a pass above a failing load: latency is not monotone in load here (noise near the "
                         "threshold); the capacity is the highest pass below the lowest fail")  # fmt: skip
    smallest = requests_per_probe(opts.percentiles, minimum=opts.requests, kind=opts.kind, load=opts.start)
    result = Capacity(
        capacity_id=capacity_id,
        created_at=iso_utc(),
        load_kind=opts.kind,
        slos=list(opts.slos),
        start=opts.start,
        maximum=opts.maximum,
        precision=opts.precision,
        precision_rule=precision_text(opts.kind, opts.precision),
        requests_per_probe=smallest,
        requests_rule="per variant and probe: at least ceil(10 / (1 - p/100)) requests for the highest percentile "
        "SLO p (100 for p90), --requests if larger"
        + (", and at least 2 x the concurrency" if opts.kind == "concurrency" else ""),
        runtime=target.runtime,
        speculative_window=window,
        price=price,
        variants=caps,
        capacity_ratio=cap_ratio,
        throughput_ratio=thr_ratio,
        cost_ratio=cost_ratio,
        stops_paying=_stops_paying(probes, runs),
        probes=probes,
        notes=notes,
    )
    atomic_write_text(folder / CAPACITY_FILE, result.model_dump_json(indent=2) + "\n")
    return result
