"""Load test: the whole local pipeline at 256 concurrent streams, 10,000 requests per endpoint.

What ``spectrn bench --local --runtime sim`` does, step by step through the same functions, with
measurements in between: two simulator processes (baseline + speculative, max_num_seqs 256), the load
generator at closed-loop concurrency 256 against both at once, then analysis (summary.json, llmperf files,
EMF) and the report. Checks that no record is lost (every scheduled request has exactly one record, every
one succeeded) and measures duration and peak RSS of the client process (after the run and after
analysis) and of each server process (VmHWM, read before the servers stop).

    .venv/bin/python benchmarks/load_10k.py [--requests 10000] [--concurrency 256] [--max-tokens 64]

Prints a summary and writes benchmarks/results/load_10k.json (run folder under benchmarks/results/load_10k_runs/).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from spectrn.bench.local import execute, plan_from_config
from spectrn.configuration.sources import build_config
from spectrn.finish import finish
from spectrn.run.records import iter_records
from spectrn.runtimes.sim_pair import SimPair

HERE = Path(__file__).resolve().parent


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def proc_status_mib(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000, help="measured requests per endpoint")
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--time-scale", type=float, default=0.05, help="simulator time scale")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "load_10k_runs")
    ap.add_argument("--report", action="store_true", help="also write the HTML/PNG report")
    args = ap.parse_args()

    cfg = build_config(
        {
            "runtime": "sim",
            "max_num_seqs": max(256, args.concurrency),
            "bench": {
                "prompts": "all",
                "requests": args.requests,
                "warmup": args.warmup,
                "max_tokens": args.max_tokens,
                "concurrency": [args.concurrency],
                "api": "completions",
                "timeout_s": 600,
            },
        },
        environ={},
    )
    run_id = time.strftime("load10k-%Y%m%d-%H%M%S", time.gmtime())
    shutil.rmtree(args.out / run_id, ignore_errors=True)
    rss_start = peak_rss_mib()
    servers: dict[str, float | None] = {}

    t0 = time.monotonic()
    with SimPair(cfg, args.out / run_id / "servers", time_scale=args.time_scale) as pair:
        plan = plan_from_config(cfg, dict(pair.endpoints), run_id=run_id, out_root=args.out, model=pair.model)
        t_run = time.monotonic()
        outcome = execute(plan, cfg, None, quiet=True)
        run_s = time.monotonic() - t_run
        rss_after_run = peak_rss_mib()
        for variant, proc in pair.procs.items():
            servers[variant] = proc_status_mib(proc.pid, "VmHWM")
    t_an = time.monotonic()
    summary = finish(outcome.run_dir, report=args.report).summary
    analyze_s = time.monotonic() - t_an
    rss_after_analysis = peak_rss_mib()
    total_s = time.monotonic() - t0

    # no lost records: every scheduled (variant, index) exactly once, every one succeeded
    seen: Counter[tuple[str, int, bool]] = Counter()
    errors: Counter[str] = Counter()
    for rec in iter_records(outcome.run_dir / "requests.jsonl"):
        seen[(rec.variant, rec.index, rec.warmup)] += 1
        if not rec.ok:
            errors[f"{rec.variant}:{rec.error}"] += 1
    per_variant = {
        v: {
            "measured": sum(1 for (vv, _, w) in seen if vv == v and not w),
            "warmup": sum(1 for (vv, _, w) in seen if vv == v and w),
        }
        for v in ("baseline", "speculative")
    }
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    lines = sum(1 for _ in (outcome.run_dir / "requests.jsonl").open(encoding="utf-8"))
    expected_lines = 2 * (args.requests + args.warmup)
    ok = (
        all(c == {"measured": args.requests, "warmup": args.warmup} for c in per_variant.values())
        and duplicates == 0
        and not errors
        and lines == expected_lines
        and summary.clean
    )
    lv = summary.levels[0]
    tokens = sum(lv.variants[v].output_tokens_per_s.aggregate or 0 for v in ("baseline", "speculative"))
    result = {
        "ok": ok,
        "requests_per_endpoint": args.requests,
        "warmup_per_endpoint": args.warmup,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "time_scale": args.time_scale,
        "records": {"lines": lines, "expected": expected_lines, "per_variant": per_variant},
        "duplicates": duplicates,
        "errors": dict(errors),
        "clean": summary.clean,
        "warnings": summary.warnings(),
        "duration_s": {"run": round(run_s, 1), "analysis": round(analyze_s, 1), "total": round(total_s, 1)},
        "aggregate_output_tokens_per_s_both": round(tokens, 1),
        "peak_rss_mib": {
            "client_at_start": round(rss_start, 1),
            "client_after_run": round(rss_after_run, 1),
            "client_after_analysis": round(rss_after_analysis, 1),
            "servers": {k: (round(v, 1) if v is not None else None) for k, v in servers.items()},
        },
        "requests_jsonl_mib": round((outcome.run_dir / "requests.jsonl").stat().st_size / 2**20, 1),
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "run_dir": str(outcome.run_dir),
    }
    out = HERE / "results" / "load_10k.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"{'OK' if ok else 'FAILED'}: wrote {out}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
