"""Records -> statistics. Pure functions, except ``analyze_run`` which reads and writes a run folder.

Definitions (per successful, non-warm-up request with n output tokens):
- TTFT: send -> first token-bearing event.
- TPOT = (e2e - TTFT) / (n - 1)   (as inference-perf and vLLM's bench define it).
- per-token ITL: for each event after the first, a gap g carrying k tokens counts as k gaps of g / k,
  so a speculative step that emits 5 tokens after 50 ms contributes five 10 ms samples.
- chunk latency: the raw gap between consecutive events (what one engine step looks like to a client).
- llmperf-compatible ITL: (TTFT + sum of event gaps) / number of events, i.e. last event time / events:
  llmperf's definition, wrong under speculation (it divides by events, not tokens, and includes TTFT).
  Reported only for reconciliation with published numbers, always labelled as such.
- output throughput per request: n / e2e; aggregate: all output tokens / (last end - first send).

Confidence intervals: percentile bootstrap (default 1000 resamples, seeded). Per-token ITL resamples
whole requests (tokens of one request are correlated). Speedups are paired by schedule index (both
variants got the same prompt at the same index), resampling indices. Large runs are sub-sampled to a
fixed number of requests for the bootstrap only; point estimates always use every request.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError, one_line
from spectrn.run.records import RequestRecord, RunMeta, iter_records

QUANTILES = (50, 90, 95, 99)
BOOT_RESAMPLES = 1000
BOOT_MAX_REQUESTS = 2000


@dataclass(frozen=True)
class RequestMetrics:
    index: int
    variant: str
    prompt_class: str
    ttft: float
    e2e: float
    tpot: float | None
    itls: list[float]
    chunk_latencies: list[float]
    output_tokens: int
    throughput_tok_s: float
    llmperf_itl: float
    decode_tokens: int
    decode_chunks: int

    @property
    def tokens_per_decode_chunk(self) -> float | None:
        return self.decode_tokens / self.decode_chunks if self.decode_chunks else None


def request_metrics(rec: RequestRecord) -> RequestMetrics | None:
    """Per-request metrics, or None for a failed request or one without tokens."""
    if not rec.ok or rec.ttft is None or rec.e2e is None or not rec.chunk_times:
        return None
    n = rec.output_tokens
    if n <= 0:
        return None
    times, toks = rec.chunk_times, rec.chunk_tokens
    itls: list[float] = []
    gaps: list[float] = []
    for i in range(1, len(times)):
        g = times[i] - times[i - 1]
        gaps.append(g)
        k = toks[i] if i < len(toks) else 1
        if k > 0:
            itls.extend([g / k] * k)
    tpot = (rec.e2e - rec.ttft) / (n - 1) if n > 1 else None
    decode = toks[1:]
    return RequestMetrics(
        index=rec.index,
        variant=rec.variant,
        prompt_class=rec.prompt_class,
        ttft=rec.ttft,
        e2e=rec.e2e,
        tpot=tpot,
        itls=itls,
        chunk_latencies=gaps,
        output_tokens=n,
        throughput_tok_s=n / rec.e2e if rec.e2e > 0 else 0.0,
        llmperf_itl=times[-1] / len(times),
        decode_tokens=sum(decode),
        decode_chunks=len(decode),
    )


# ---- statistics ----------------------------------------------------------------------------------


def _rng(seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed)


def describe(values: Sequence[float]) -> dict[str, Any]:
    """mean, min, max, stddev and the quantiles of ``values`` (None when empty)."""
    import numpy as np

    if len(values) == 0:
        return {"n": 0, "mean": None, **{f"p{q}": None for q in QUANTILES}}
    a = np.asarray(values, dtype=float)
    qs = np.percentile(a, QUANTILES)
    out: dict[str, Any] = {"n": int(a.size), "mean": float(a.mean())}
    out.update({f"p{q}": float(v) for q, v in zip(QUANTILES, qs, strict=True)})
    out.update(min=float(a.min()), max=float(a.max()), stddev=float(a.std(ddof=1)) if a.size > 1 else 0.0)
    return out


def bootstrap(
    stat: Callable[[Any], Any],
    n: int,
    *,
    resamples: int = BOOT_RESAMPLES,
    seed: int = 0,
    vectorized: bool = False,
) -> list[float] | None:
    """95% percentile-bootstrap interval of ``stat(indices)`` over ``n`` units, or None if n < 2.

    With ``vectorized``, ``stat`` takes a (resamples x n) index matrix and returns one value per row, which
    replaces a Python loop of ``resamples`` calls by a few array operations.
    """
    import numpy as np

    if n < 2:
        return None
    rng = _rng(seed)
    if vectorized:
        chunks = []
        for start in range(0, resamples, 250):  # bounded memory: 250 x n indices at a time
            rows = rng.integers(0, n, (min(250, resamples - start), n))
            chunks.append(np.asarray(stat(rows), dtype=float))
        arr = np.concatenate(chunks)
        vals = arr[np.isfinite(arr)]
    else:
        out = []
        for _ in range(resamples):
            v = stat(rng.integers(0, n, n))
            if v is not None and math.isfinite(v):
                out.append(v)
        vals = np.asarray(out, dtype=float)
    if vals.size < resamples // 2:
        return None
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return [float(lo), float(hi)]


def _subsample(n: int, seed: int) -> Any:
    import numpy as np

    if n <= BOOT_MAX_REQUESTS:
        return np.arange(n)
    return np.sort(_rng(seed + 7).choice(n, BOOT_MAX_REQUESTS, replace=False))


def stats_with_ci(values: Sequence[float], *, seed: int = 0, resamples: int = BOOT_RESAMPLES) -> dict[str, Any]:
    """``describe`` plus bootstrap CIs of the mean and p50."""
    import numpy as np

    out = describe(values)
    a = np.asarray(values, dtype=float)
    sub = a[_subsample(a.size, seed)]
    out["ci95"] = {
        "mean": bootstrap(lambda i: sub[i].mean(axis=-1), sub.size, seed=seed, resamples=resamples, vectorized=True),
        "p50": bootstrap(
            lambda i: np.median(sub[i], axis=-1), sub.size, seed=seed + 1, resamples=resamples, vectorized=True
        ),
    }
    return out


def clustered_stats_with_ci(
    groups: Sequence[Sequence[float]], *, seed: int = 0, resamples: int = BOOT_RESAMPLES
) -> dict[str, Any]:
    """Stats of all values in ``groups`` (e.g. per-token ITLs); CIs resample whole groups (requests)."""
    import numpy as np

    flat = [v for g in groups for v in g]
    out = describe(flat)
    sel = _subsample(len(groups), seed)
    arrays = [np.asarray(groups[i], dtype=float) for i in sel]
    lengths = np.array([a.size for a in arrays])
    if lengths.sum() == 0:
        out["ci95"] = {"mean": None, "p50": None}
        return out
    resamples = min(resamples, 300)  # each resample concatenates up to BOOT_MAX_REQUESTS arrays

    def stat(q: str) -> Callable[[Any], float]:
        def f(idx: Any) -> float:
            cat = np.concatenate([arrays[i] for i in idx])
            if cat.size == 0:
                return float("nan")
            return float(cat.mean() if q == "mean" else np.median(cat))

        return f

    out["ci95"] = {
        "mean": bootstrap(stat("mean"), len(arrays), seed=seed, resamples=resamples),
        "p50": bootstrap(stat("p50"), len(arrays), seed=seed + 1, resamples=resamples),
    }
    return out


# ---- one variant ---------------------------------------------------------------------------------


def variant_summary(
    records: Sequence[RequestRecord],
    metrics: Sequence[RequestMetrics],
    *,
    acceptance: dict[str, Any] | None,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``V`` object of summary.json for one variant (or one variant within one prompt class)."""
    errors = [r for r in records if not r.ok]
    error_classes = Counter(r.error for r in errors)
    error_examples: dict[str, str] = {}
    for r in errors:
        if r.error and r.error not in error_examples:
            error_examples[r.error] = (r.error_msg or "")[:300]
    total_tokens = sum(m.output_tokens for m in metrics)
    ok_recs = [r for r in records if r.ok and r.e2e is not None]
    if ok_recs:
        start = min(r.sent_at for r in ok_recs)
        end = max(r.sent_at + (r.e2e or 0.0) for r in ok_recs)
        duration = max(end - start, 1e-9)
    else:
        duration = 0.0
    tpots = [m.tpot for m in metrics if m.tpot is not None]
    # tokens per event after the first, pooled over requests: under speculation this is the client-side
    # view of the mean acceptance length (accepted + bonus per step), comparable to the server counters
    decode_tokens = sum(m.decode_tokens for m in metrics)
    decode_chunks = sum(m.decode_chunks for m in metrics)
    v: dict[str, Any] = {
        "ttft_s": stats_with_ci([m.ttft for m in metrics], seed=seed),
        "tpot_s": stats_with_ci(tpots, seed=seed + 10),
        "itl_s": clustered_stats_with_ci([m.itls for m in metrics], seed=seed + 20),
        "chunk_latency_s": describe([g for m in metrics for g in m.chunk_latencies]),
        "e2e_s": stats_with_ci([m.e2e for m in metrics], seed=seed + 30),
        "llmperf_itl_s": describe([m.llmperf_itl for m in metrics]),
        "output_tokens_per_s": {
            "per_request": describe([m.throughput_tok_s for m in metrics]),
            "aggregate": total_tokens / duration if duration > 0 else None,
        },
        "output_tokens": describe([m.output_tokens for m in metrics]),
        "tokens_per_chunk_mean": decode_tokens / decode_chunks if decode_chunks else None,
        "requests": {
            "completed": len(metrics),
            "errors": len(errors),
            "error_rate": len(errors) / len(records) if records else 0.0,
            "error_classes": dict(error_classes),
            "error_examples": error_examples,
        },
        "duration_s": duration,
        "acceptance": acceptance,
    }
    if slo_ttft_s is not None or slo_tpot_s is not None:
        good = [
            m
            for m in metrics
            if (slo_ttft_s is None or m.ttft <= slo_ttft_s)
            and (slo_tpot_s is None or (m.tpot is not None and m.tpot <= slo_tpot_s))
        ]
        v["goodput"] = {
            "slo_ttft_s": slo_ttft_s,
            "slo_tpot_s": slo_tpot_s,
            "fraction": len(good) / len(records) if records else None,
            "requests_per_s": len(good) / duration if duration > 0 else None,
        }
    return v


# ---- A/B -----------------------------------------------------------------------------------------


def _paired(
    base: Sequence[RequestMetrics], spec: Sequence[RequestMetrics]
) -> tuple[list[RequestMetrics], list[RequestMetrics]]:
    bi = {m.index: m for m in base}
    si = {m.index: m for m in spec}
    common = sorted(set(bi) & set(si))
    return [bi[i] for i in common], [si[i] for i in common]


def speedups(
    base: Sequence[RequestMetrics], spec: Sequence[RequestMetrics], *, seed: int = 0, resamples: int = BOOT_RESAMPLES
) -> dict[str, Any]:
    """baseline / speculative for latencies (>1 = speculation faster), speculative / baseline for throughput."""
    import numpy as np

    b, s = _paired(base, spec)
    out: dict[str, Any] = {"paired_requests": len(b)}
    if not b:
        return out
    sel = _subsample(len(b), seed)
    b = [b[i] for i in sel]
    s = [s[i] for i in sel]

    def arr(ms: Sequence[RequestMetrics], f: Callable[[RequestMetrics], float | None]) -> Any:
        return np.array([np.nan if f(m) is None else f(m) for m in ms], dtype=float)

    tb, ts = arr(b, lambda m: m.tpot), arr(s, lambda m: m.tpot)
    eb, es = arr(b, lambda m: m.e2e), arr(s, lambda m: m.e2e)
    fb, fs = arr(b, lambda m: m.ttft), arr(s, lambda m: m.ttft)
    qb, qs = arr(b, lambda m: m.throughput_tok_s), arr(s, lambda m: m.throughput_tok_s)
    ib = [np.asarray(m.itls) for m in b]
    is_ = [np.asarray(m.itls) for m in s]

    # these take one index vector (the point estimate) or a matrix of them (vectorized bootstrap rows)
    def ratio_med(x: Any, y: Any) -> Callable[[Any], Any]:
        return lambda i: np.nanmedian(x[i], axis=-1) / np.nanmedian(y[i], axis=-1)

    def ratio_mean(x: Any, y: Any) -> Callable[[Any], Any]:
        return lambda i: np.nanmean(x[i], axis=-1) / np.nanmean(y[i], axis=-1)

    def itl_ratio(i: Any) -> float:
        cb = np.concatenate([ib[j] for j in i])
        cs = np.concatenate([is_[j] for j in i])
        if cb.size == 0 or cs.size == 0:
            return float("nan")
        return float(np.median(cb) / np.median(cs))

    all_idx = np.arange(len(b))
    specs: dict[str, tuple[Callable[[Any], Any], int, bool]] = {
        "tpot_p50": (ratio_med(tb, ts), resamples, True),
        "tpot_mean": (ratio_mean(tb, ts), resamples, True),
        "itl_p50": (itl_ratio, min(resamples, 300), False),
        "e2e_p50": (ratio_med(eb, es), resamples, True),
        "ttft_p50": (ratio_med(fb, fs), resamples, True),
        "throughput": (ratio_mean(qs, qb), resamples, True),
    }
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resamples (no TPOT) give NaN, dropped below
        for k, (name, (fn, nres, vec)) in enumerate(specs.items()):
            value = float(fn(all_idx))
            out[name] = {
                "value": value if math.isfinite(value) else None,
                "ci95": bootstrap(fn, len(b), seed=seed + 100 + k, resamples=nres, vectorized=vec),
            }
    return out


def equivalence(records: Iterable[RequestRecord], a: str = "baseline", b: str = "speculative") -> dict[str, Any]:
    """Token-by-token comparison of the two variants' outputs at the same schedule index."""
    outs: dict[str, dict[tuple[str, int], RequestRecord]] = defaultdict(dict)
    for r in records:
        if r.ok and r.variant in (a, b):
            outs[r.variant][(r.level, r.index)] = r
    compared = matched = 0
    divergences = []
    basis = "token_ids"
    for key, ra in sorted(outs[a].items()):
        rb = outs[b].get(key)
        if rb is None:
            continue
        ta: Sequence[Any] | None = ra.output_token_ids
        tb: Sequence[Any] | None = rb.output_token_ids
        if ta is None or tb is None:
            if ra.output_text is None or rb.output_text is None:
                continue
            ta, tb, basis = ra.output_text, rb.output_text, "text"
        compared += 1
        if list(ta) == list(tb):
            matched += 1
            continue
        first = next((i for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y), min(len(ta), len(tb)))
        divergences.append({"level": key[0], "index": key[1], "prompt_id": ra.prompt_id, "first_divergence": first})
    return {
        "compared": compared,
        "matched": matched,
        "match_rate": matched / compared if compared else None,
        "basis": basis,
        "divergences": divergences[:100],
    }


def cost_per_million(tokens_per_s: float | None, hourly_usd: float, share: float) -> float | None:
    if not tokens_per_s:
        return None
    return hourly_usd * share / (tokens_per_s * 3600.0) * 1e6


# ---- whole run -----------------------------------------------------------------------------------


def _acceptance_for(acc: dict[str, Any], variant: str, level: str) -> dict[str, Any] | None:
    value = acc.get(f"{variant}@{level}", acc.get(variant))
    return value if isinstance(value, dict) else None


def summarize(
    records: Sequence[RequestRecord],
    *,
    run_id: str,
    acceptance: dict[str, Any] | None = None,
    config: dict[str, Any] | None = None,
    interrupted: bool = False,
    unfinished: bool = False,
    seed: int = 0,
) -> dict[str, Any]:
    """summary.json for a run (schema in docs/architecture.md); multiple load levels go under ``levels``."""
    from spectrn.spec.catalog import INSTANCES

    cfg = config or {}
    bench = cfg.get("bench", {}) if isinstance(cfg.get("bench"), dict) else {}
    pricing = cfg.get("pricing", {}) if isinstance(cfg.get("pricing"), dict) else {}
    inst = INSTANCES.get(str(cfg.get("instance_type", "trn2.48xlarge")), INSTANCES["trn2.48xlarge"])
    hourly = float(pricing.get("instance_hourly_usd") or inst.hourly_usd)
    share = float(pricing.get("instances_per_service") or 0.5)
    max_err = float(bench.get("max_error_rate", 0.05))
    slo_ttft, slo_tpot = bench.get("slo_ttft_s"), bench.get("slo_tpot_s")
    acc = acceptance or {}

    measured = [r for r in records if not r.warmup]
    levels = list(dict.fromkeys(r.level for r in measured))
    if not levels:
        raise AnalysisError(
            f"run {run_id} has no measured requests", hint="the run was interrupted before any request finished"
        )

    def level_summary(level: str) -> dict[str, Any]:
        recs = [r for r in measured if r.level == level]
        variants = list(dict.fromkeys(r.variant for r in recs))
        by_var = {v: [r for r in recs if r.variant == v] for v in variants}
        mets = {v: [m for m in map(request_metrics, rs) if m is not None] for v, rs in by_var.items()}
        out: dict[str, Any] = {"variants": {}, "by_prompt_class": {}, "warnings": []}
        for v in variants:
            out["variants"][v] = variant_summary(
                by_var[v],
                mets[v],
                acceptance=_acceptance_for(acc, v, level),
                slo_ttft_s=slo_ttft,
                slo_tpot_s=slo_tpot,
                seed=seed,
            )
        classes = sorted({r.prompt_class for r in recs})
        for c in classes:
            out["by_prompt_class"][c] = {
                v: variant_summary(
                    [r for r in by_var[v] if r.prompt_class == c],
                    [m for m in mets[v] if m.prompt_class == c],
                    acceptance=None,
                    slo_ttft_s=slo_ttft,
                    slo_tpot_s=slo_tpot,
                    seed=seed,
                )
                for v in variants
            }
        if "baseline" in mets and "speculative" in mets:
            out["speedup"] = speedups(mets["baseline"], mets["speculative"], seed=seed)
            out["speedup_by_prompt_class"] = {
                c: speedups(
                    [m for m in mets["baseline"] if m.prompt_class == c],
                    [m for m in mets["speculative"] if m.prompt_class == c],
                    seed=seed,
                )
                for c in classes
            }
            out["equivalence"] = equivalence(recs)
            eq = out["equivalence"]
            if eq["compared"] and eq["matched"] < eq["compared"]:
                out["warnings"].append(
                    f"OUTPUT DIVERGENCE: {eq['compared'] - eq['matched']} of {eq['compared']} greedy outputs differ "
                    f"between baseline and speculative (first at index {eq['divergences'][0]['index']})"
                )
        out["cost"] = {
            v: {
                "instance_hourly_usd": hourly,
                "instances_per_service": share,
                "usd_per_million_output_tokens": cost_per_million(
                    out["variants"][v]["output_tokens_per_s"]["aggregate"], hourly, share
                ),
            }
            for v in variants
        }
        for v in variants:
            rq = out["variants"][v]["requests"]
            if rq["error_rate"] > max_err:
                out["warnings"].append(
                    f"NOT A CLEAN RUN: {v} error rate {rq['error_rate']:.1%} exceeds {max_err:.0%} "
                    f"({rq['errors']} failed: {rq['error_classes']})"
                )
            if rq["completed"] == 0:
                out["warnings"].append(f"NOT A CLEAN RUN: {v} has no successful request")
        return out

    per_level = {lv: level_summary(lv) for lv in levels}
    first = per_level[levels[0]]
    warnings = [f"[{lv}] {w}" if len(levels) > 1 else w for lv, s in per_level.items() for w in s["warnings"]]
    if interrupted:
        warnings.append("NOT A CLEAN RUN: the run was interrupted; statistics cover the requests that finished")
    elif unfinished:
        warnings.append(
            "NOT A CLEAN RUN: the run never finished (run.json has no end time: the load generator was killed "
            "or is still running); statistics cover the requests that finished"
        )
    summary: dict[str, Any] = {
        "run_id": run_id,
        "level": levels[0],
        "clean": not any(w.startswith("NOT A CLEAN RUN") or "NOT A CLEAN RUN" in w for w in warnings),
        "warnings": warnings,
        **{k: v for k, v in first.items() if k != "warnings"},
    }
    if len(levels) > 1:
        summary["levels"] = {lv: {k: v for k, v in s.items() if k != "warnings"} for lv, s in per_level.items()}
    return summary


def load_run(run_dir: Path) -> tuple[RunMeta, list[RequestRecord], dict[str, Any]]:
    if not run_dir.is_dir():
        raise AnalysisError(f"{run_dir} is not a run folder", hint="pass results/<run-id>")
    try:
        meta = RunMeta.model_validate_json((run_dir / "run.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnalysisError(f"{run_dir}/run.json is missing", hint="is this a spectrn run folder?") from None
    except ValueError as e:
        raise AnalysisError(
            f"{run_dir}/run.json is corrupt: {one_line(e)}", hint="restore run.json, or re-run the bench"
        ) from None
    records = list(iter_records(run_dir / "requests.jsonl"))
    acc_path = run_dir / "acceptance.json"
    acceptance: dict[str, Any] = {}
    if acc_path.exists():
        try:
            acceptance = json.loads(acc_path.read_text(encoding="utf-8"))
        except ValueError:
            acceptance = {}
    return meta, records, acceptance


def analyze_run(run_dir: Path, *, seed: int = 0) -> dict[str, Any]:
    """Read a run folder, write summary.json and the llmperf-compatible files, return the summary."""
    from spectrn.analyze.llmperf import write_llmperf_files
    from spectrn.paths import atomic_write_text

    meta, records, acceptance = load_run(run_dir)
    summary = summarize(
        records,
        run_id=meta.run_id,
        acceptance=acceptance,
        config=meta.config,
        interrupted=meta.interrupted,
        unfinished=meta.finished_at is None,
        seed=seed,
    )
    summary["notes"] = meta.notes
    summary["model"] = getattr(meta, "model", None)
    atomic_write_text(run_dir / "summary.json", json.dumps(finite(summary), indent=2, allow_nan=False))
    write_llmperf_files(run_dir, meta, records)
    return summary


def finite(o: Any) -> Any:
    """Replace NaN/Inf (e.g. a ratio over an empty class) by None, recursively, for strict JSON."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [finite(v) for v in o]
    return o
