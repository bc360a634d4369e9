"""One capacity probe: a bench level at one load against some endpoints, finished as a run folder and judged.

A probe is an ordinary run (``plan_from_config`` + ``execute`` + ``finish``) with a single load level and the
capacity's SLOs in ``bench.slo``, so its ``summary.json`` judges the percentile SLOs exactly as ``spectrn
bench`` would, and ``spectrn report`` reads its folder. A variant passes a probe when every percentile SLO that
binds it is met (``met`` True: a percentile with nothing to judge is not shown to meet it) and its error rate is
within ``bench.max_error_rate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spectrn.capacity.search import LoadKind
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.origins import format_validation_error, validation_hint
from spectrn.errors import ConfigError
from spectrn.events import OnEvent
from spectrn.run.capacity import Estimate, ProbeVerdict
from spectrn.run.summary import Provenance, Summary, VariantSummary


@dataclass
class Target:
    """The servers probes run against: ``endpoints`` by variant, the model to request (None: what the server
    lists), how to describe them (``provenance``) and where they are (``runtime``: sim or endpoints)."""

    endpoints: dict[str, str]
    model: str | None
    provenance: Callable[[SpectrnConfig, dict[str, str]], Provenance]
    runtime: str


def load_label(kind: LoadKind, load: float) -> str:
    """The run's level label: c4 (closed loop, 4 streams) or r2.5 (open loop, 2.5 req/s)."""
    return f"c{int(load)}" if kind == "concurrency" else f"r{load:g}"


def probe_config(cfg: SpectrnConfig, kind: LoadKind, load: float, requests: int) -> SpectrnConfig:
    """The run spec of one probe: ``cfg`` with this single load level and ``requests`` measured requests."""
    data = cfg.model_dump(mode="json")
    bench = data["bench"]
    bench["requests"] = int(requests)
    if kind == "rate":
        bench["request_rate"] = [float(load)]
    else:
        bench["request_rate"] = None
        bench["concurrency"] = [int(load)]
    try:
        return SpectrnConfig.model_validate(data)
    except ValidationError as e:
        from spectrn.configuration.origins import Origins

        raise ConfigError(
            f"{format_validation_error(e, Origins())} (capacity probe at {load_label(kind, load)})",
            hint=validation_hint(e, Origins()),
        ) from None


def verdict_of(vs: VariantSummary, max_error_rate: float) -> ProbeVerdict:
    """Pass or fail with the reasons, and the figures the capacity reports, from one variant's summary."""
    checks = list(vs.goodput.checks) if vs.goodput is not None else []
    reasons = []
    if not vs.requests.completed:
        reasons.append("no request completed")
    if not checks:
        reasons.append("no percentile SLO binds these requests")
    for c in checks:
        if c.met is None:
            reasons.append(f"{c.slo}: nothing to judge (no value on {c.n} requests)")
        elif not c.met:
            assert c.observed_s is not None
            reasons.append(f"{c.slo}: observed {c.observed_s * 1e3:.4g} ms")
    if vs.requests.error_rate > max_error_rate:
        reasons.append(f"error rate {vs.requests.error_rate:.1%} above bench.max_error_rate {max_error_rate:.1%}")
    thr = vs.output_tokens_per_s
    cost = vs.cost
    return ProbeVerdict(
        passed=not reasons,
        reasons=reasons,
        checks=checks,
        completed=vs.requests.completed,
        error_rate=vs.requests.error_rate,
        output_tokens_per_s=Estimate(value=thr.aggregate, ci95=thr.aggregate_ci95),
        usd_per_million_output_tokens=Estimate(
            value=cost.usd_per_million_output_tokens if cost else None,
            ci95=cost.usd_per_million_output_tokens_ci95 if cost else None,
        ),
        tpot_p50_s=vs.tpot_s.p50,
        ttft_p50_s=vs.ttft_s.p50,
        goodput_fraction=vs.goodput.fraction if vs.goodput is not None else None,
    )


@dataclass
class ProbeRun:
    """A finished probe: its folder, its summary, and each variant's verdict."""

    run_dir: Path
    summary: Summary
    verdicts: dict[str, ProbeVerdict]


def run_probe(
    cfg: SpectrnConfig,
    target: Target,
    variants: Sequence[str],
    kind: LoadKind,
    load: float,
    requests: int,
    *,
    out_root: Path,
    run_id: str,
    on_event: OnEvent | None,
) -> ProbeRun:
    """Run ``variants`` at ``load`` with ``requests`` each (the config's schedule mode: simultaneously by
    default, each on its own server), finish the folder (summary, llmperf files; no report: ``spectrn report``
    writes one on demand) and judge each variant."""
    from spectrn.bench.local import execute, plan_from_config
    from spectrn.finish import finish

    pcfg = probe_config(cfg, kind, load, requests)
    endpoints = {v: target.endpoints[v] for v in variants}
    plan = plan_from_config(
        pcfg, endpoints, run_id=run_id, out_root=out_root, model=target.model,
        provenance=target.provenance(pcfg, endpoints), on_event=on_event,
    )  # fmt: skip
    run_dir = execute(plan, pcfg, on_event).run_dir
    done = finish(run_dir, report=False, emf=False)
    level = done.summary.levels[0] if done.summary.levels else None
    verdicts: dict[str, ProbeVerdict] = {}
    for v in variants:
        vs: Any = level.variants.get(v) if level is not None else None
        if vs is None:
            verdicts[v] = ProbeVerdict(passed=False, reasons=["no request completed"])
        else:
            verdicts[v] = verdict_of(vs, pcfg.bench.max_error_rate)
    return ProbeRun(run_dir, done.summary, verdicts)
