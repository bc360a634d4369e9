"""llmperf-compatible result files, both ways.

Write: for each variant, ``<variant>/<model>_<in>_<out>_summary.json`` (flat ``results_*`` keys) and
``..._individual_responses.json``, so dashboards and scripts built for llmperf (as the published
experiment's CloudWatch path) keep working. Their ``inter_token_latency_s`` follows llmperf's own
definition (see spectrn.analyze.summary); spectrn's summary.json has the correct per-token figures.

Ingest: read the result folders of an llmperf run (the ``--engine llmperf`` pod, one folder per variant)
and produce spectrn's summary.json from the individual responses. llmperf records no per-event times, so
per-token ITL is not available from it (null), and its token counts come from its own fixed tokenizer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError
from spectrn.run.records import RequestRecord, RunMeta

LLMPERF_QUANTILES = (25, 50, 75, 90, 95, 99)


def _flat_stats(prefix: str, values: list[float]) -> dict[str, Any]:
    import numpy as np

    out: dict[str, Any] = {}
    if not values:
        return out
    a = np.asarray(values, dtype=float)
    for q in LLMPERF_QUANTILES:
        out[f"{prefix}_quantiles_p{q}"] = float(np.percentile(a, q))
    out[f"{prefix}_mean"] = float(a.mean())
    out[f"{prefix}_min"] = float(a.min())
    out[f"{prefix}_max"] = float(a.max())
    out[f"{prefix}_stddev"] = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "model"


def individual_response(rec: RequestRecord) -> dict[str, Any]:
    from spectrn.analyze.summary import request_metrics

    m = request_metrics(rec)
    n_in = rec.prompt_tokens or 0
    if m is None:
        code = rec.status if rec.status and rec.status != 200 else -1
        return {
            "error_code": code,
            "error_msg": rec.error_msg or rec.error or "",
            "inter_token_latency_s": 0,
            "ttft_s": 0,
            "end_to_end_latency_s": 0,
            "request_output_throughput_token_per_s": 0,
            "number_total_tokens": n_in,
            "number_output_tokens": 0,
            "number_input_tokens": n_in,
        }
    return {
        "error_code": None,
        "error_msg": "",
        "inter_token_latency_s": m.llmperf_itl,
        "ttft_s": m.ttft,
        "end_to_end_latency_s": m.e2e,
        "request_output_throughput_token_per_s": m.throughput_tok_s,
        "number_total_tokens": n_in + m.output_tokens,
        "number_output_tokens": m.output_tokens,
        "number_input_tokens": n_in,
    }


def write_llmperf_files(run_dir: Path, meta: RunMeta, records: list[RequestRecord]) -> list[Path]:
    from spectrn.paths import atomic_write_text

    written = []
    measured = [r for r in records if not r.warmup]
    model = _safe(str(getattr(meta, "model", None) or "model"))
    out_tokens = int(getattr(meta, "max_tokens", 0) or 0)
    for variant in dict.fromkeys(r.variant for r in measured):
        recs = [r for r in measured if r.variant == variant]
        indiv = [individual_response(r) for r in recs]
        ok = [x for x in indiv if x["error_code"] is None]
        ins = [x["number_input_tokens"] for x in indiv]
        mean_in = int(sum(ins) / len(ins)) if ins else 0
        stem = f"{model}_{mean_in}_{out_tokens}"
        summary: dict[str, Any] = {
            "version": "spectrn-llmperf-compatible",
            "name": stem,
            "model": getattr(meta, "model", None),
            "mean_input_tokens": mean_in,
            "mean_output_tokens": out_tokens,
            "num_concurrent_requests": None,
            "note": "inter_token_latency uses llmperf's definition (divides by SSE events); see summary.json itl_s",
        }
        for key, prefix in (
            ("inter_token_latency_s", "results_inter_token_latency_s"),
            ("ttft_s", "results_ttft_s"),
            ("end_to_end_latency_s", "results_end_to_end_latency_s"),
            ("request_output_throughput_token_per_s", "results_request_output_throughput_token_per_s"),
            ("number_input_tokens", "results_number_input_tokens"),
            ("number_output_tokens", "results_number_output_tokens"),
        ):
            summary.update(_flat_stats(prefix, [float(x[key]) for x in ok]))
        errors = [x for x in indiv if x["error_code"] is not None]
        freq: dict[str, int] = {}
        for x in errors:
            freq[str(x["error_code"])] = freq.get(str(x["error_code"]), 0) + 1
        total_out = sum(x["number_output_tokens"] for x in ok)
        ok_recs = [r for r in recs if r.ok and r.e2e is not None]
        duration = max(r.sent_at + (r.e2e or 0) for r in ok_recs) - min(r.sent_at for r in ok_recs) if ok_recs else 0.0
        summary.update(
            results_num_requests_started=len(indiv),
            results_error_rate=len(errors) / len(indiv) if indiv else 0.0,
            results_number_errors=len(errors),
            results_error_code_frequency=json.dumps(freq),
            results_mean_output_throughput_token_per_s=total_out / duration if duration > 0 else 0.0,
            results_num_completed_requests=len(ok),
            results_num_completed_requests_per_min=len(ok) / duration * 60 if duration > 0 else 0.0,
        )
        vdir = run_dir / variant
        vdir.mkdir(exist_ok=True)
        p1, p2 = vdir / f"{stem}_summary.json", vdir / f"{stem}_individual_responses.json"
        atomic_write_text(p1, json.dumps(summary, indent=2))
        atomic_write_text(p2, json.dumps(indiv, indent=2))
        written += [p1, p2]
    return written


# ---- ingest --------------------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AnalysisError(f"{path}: not a readable llmperf result file: {e}") from None


def ingest_variant(folder: Path) -> dict[str, Any]:
    """spectrn's V object from one llmperf result folder (``*_individual_responses.json``)."""
    from spectrn.analyze.summary import describe, stats_with_ci

    files = sorted(folder.glob("*_individual_responses.json"))
    if not files:
        raise AnalysisError(f"{folder} holds no *_individual_responses.json", hint="point at llmperf's --results-dir")
    rows = _read_json(files[0])
    if not isinstance(rows, list):
        raise AnalysisError(f"{files[0]}: expected a list of responses")
    ok = [r for r in rows if isinstance(r, dict) and not r.get("error_code")]
    errors = [r for r in rows if isinstance(r, dict) and r.get("error_code")]
    ttft = [float(r["ttft_s"]) for r in ok]
    e2e = [float(r["end_to_end_latency_s"]) for r in ok]
    tpot = [
        (float(r["end_to_end_latency_s"]) - float(r["ttft_s"])) / (int(r["number_output_tokens"]) - 1)
        for r in ok
        if int(r.get("number_output_tokens") or 0) > 1
    ]
    classes: dict[str, int] = {}
    for r in errors:
        classes[f"http_{r['error_code']}"] = classes.get(f"http_{r['error_code']}", 0) + 1
    return {
        "ttft_s": stats_with_ci(ttft),
        "tpot_s": stats_with_ci(tpot),
        "itl_s": None,
        "e2e_s": stats_with_ci(e2e),
        "llmperf_itl_s": describe([float(r["inter_token_latency_s"]) for r in ok]),
        "output_tokens_per_s": {
            "per_request": describe([float(r["request_output_throughput_token_per_s"]) for r in ok]),
            "aggregate": None,
        },
        "requests": {
            "completed": len(ok),
            "errors": len(errors),
            "error_rate": len(errors) / len(rows) if rows else 0.0,
            "error_classes": classes,
        },
        "acceptance": None,
        "source": f"llmperf ({files[0].name}); token counts from llmperf's tokenizer; no per-token ITL",
        "_tpot": tpot,
        "_e2e": e2e,
    }


def ingest(results_dir: Path, run_id: str | None = None) -> dict[str, Any]:
    """summary.json-shaped dict from an llmperf run: ``results_dir/<variant>/*_individual_responses.json``."""
    import numpy as np

    if not results_dir.is_dir():
        raise AnalysisError(f"{results_dir} is not a folder", hint="pass the folder holding one sub-folder per variant")
    variants = {}
    for sub in sorted(p for p in results_dir.iterdir() if p.is_dir()):
        if any(sub.glob("*_individual_responses.json")):
            variants[sub.name] = ingest_variant(sub)
    if not variants:
        raise AnalysisError(
            f"{results_dir} holds no llmperf result folders",
            hint="pass the folder with one sub-folder per variant, each holding llmperf's *_summary.json",
        )
    names = {"base": "baseline", "sd": "speculative"}
    variants = {names.get(k, k): v for k, v in variants.items()}
    summary: dict[str, Any] = {
        "run_id": run_id or results_dir.name,
        "engine": "llmperf",
        "clean": all(v["requests"]["error_rate"] <= 0.05 for v in variants.values()),
        "warnings": ["per-token ITL unavailable: llmperf records no per-event times"],
        "variants": {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in variants.items()},
        "by_prompt_class": {},
    }
    if "baseline" in variants and "speculative" in variants:
        b, s = variants["baseline"], variants["speculative"]
        sp: dict[str, Any] = {}
        for key, xb, xs in (("tpot_p50", b["_tpot"], s["_tpot"]), ("e2e_p50", b["_e2e"], s["_e2e"])):
            if xb and xs:
                ab, as_ = np.asarray(xb), np.asarray(xs)
                value = float(np.median(ab) / np.median(as_))
                # unpaired: llmperf's files don't say which prompt each response answered
                rng = np.random.default_rng(0)
                ratios = [
                    float(np.median(rng.choice(ab, ab.size)) / np.median(rng.choice(as_, as_.size)))
                    for _ in range(1000)
                ]
                lo, hi = np.percentile(ratios, [2.5, 97.5])
                sp[key] = {"value": value, "ci95": [float(lo), float(hi)], "paired": False}
        summary["speedup"] = sp
    return summary
