"""Load generator accuracy and overhead against a server with an exact token schedule.

For 1, 16, 64 and 256 concurrent streams, the reference server (its own process) streams every request
on a fixed schedule and records, with the shared monotonic clock, when each request arrived and when
each event was written. We compare spectrn's reported p50 TTFT and p50 TPOT with the same statistics
computed from the server's own timestamps (the truth), and measure the client's CPU time per streamed
token (user + system time of this process during the run / tokens received).

    .venv/bin/python benchmarks/loadgen_accuracy.py [--levels 1,16,64,256] [--tokens 128] [--pattern 1] [--ramp auto]

``--conditions quiet,loaded``: each level is run once per condition, alternating (``--repeat`` times), in one
run; ``loaded`` runs one CPU-burning process per core beside the client and the server for that level, and every
row records the 1-minute load average before and after it (``os.getloadavg``), so a reader can tell how busy the
machine was rather than trust that it was quiet.

``--ramp``: the closed-loop start (``auto``, spectrn's default, or seconds; 0 = all streams at once). Besides
the error against the client-send truth, each line gives the error against the server's own TTFT (handler
start to first write), which leaves out the server's ingress queue. Prints one line per level and writes
benchmarks/results/loadgen_accuracy_pattern<P>[_ramp<R>].json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from spectrn.analyze.metrics import request_metrics
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.plan import RunPlan
from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
from spectrn.loadgen.runner import Level, run_bench
from spectrn.run.records import read_records

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import start_reference, stop  # noqa: E402  (this folder is not a package)


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _burn() -> None:
    while True:
        pass


def burners(n: int) -> list[multiprocessing.Process]:
    procs = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    time.sleep(2)  # the scheduler sees them before the level starts
    return procs


def run_level(base: str, concurrency: int, tokens: int, out: Path, ramp_s: float | None = None) -> dict[str, float]:
    ps = PromptSet(name="bench", prompts=[Prompt(id="p", **{"class": "c"}, text="hello world")])
    n = max(2 * concurrency, 32)
    plan = RunPlan(
        run_id=f"c{concurrency}",
        out_dir=out / f"c{concurrency}",
        endpoints={"ep": base},
        schedule=build_schedule(ps, requests=n, warmup=0, seed=0, nonce=f"c{concurrency}"),
        params=RequestParams(model="ref-model", api="completions", max_tokens=tokens, keep_output=False),
        levels=[Level.closed(concurrency)],
        ramp_s=ramp_s,
    )
    urllib.request.urlopen(f"{base}/log")  # connection warm, and the log so far
    before_log = len(json.load(urllib.request.urlopen(f"{base}/log")))
    c0 = cpu_seconds()
    asyncio.run(run_bench(plan))
    cpu = cpu_seconds() - c0
    log = json.load(urllib.request.urlopen(f"{base}/log"))[before_log:]
    recs = [r for r in read_records(plan.out_dir / "requests.jsonl") if r.ok]
    mets = [m for m in map(request_metrics, recs) if m is not None]
    # TTFT truth: the server's first write minus the client's send (wall clocks of one machine); this
    # charges the client for nothing but its own reading delay
    by_prompt = {e["prompt"]: e for e in log}
    texts = {r.index: t.text for r in recs for t in plan.schedule if t.index == r.index}
    true_ttft = [by_prompt[texts[r.index]]["first_wall"] - r.sent_at for r in recs]
    true_tpot = [(e["sent"][-1] - e["sent"][0]) / (sum(e["sizes"]) - 1) for e in log]
    sched_lag = [s - (e["arrival"] + off) for e in log for s, off in zip(e["sent"], e["offsets"], strict=True)]
    got_ttft = statistics.median(m.ttft for m in mets)
    arrival_ttft = statistics.median(e["sent"][0] - e["arrival"] for e in log)
    got_tpot = statistics.median(m.tpot for m in mets if m.tpot is not None)
    tok = sum(m.output_tokens for m in mets)
    shape = json.loads((plan.out_dir / "run.json").read_text())["load_shape"][f"c{concurrency}"]
    return {
        "concurrency": concurrency,
        "ramp_s": shape["ramp_s"],
        "ramp": shape["ramp"],
        "ttft_err_vs_server_pct": (got_ttft / arrival_ttft - 1) * 100,
        "requests": len(mets),
        "errors": n - len(mets),
        "true_ttft_p50_ms": statistics.median(true_ttft) * 1e3,
        "spectrn_ttft_p50_ms": got_ttft * 1e3,
        "ttft_err_pct": (got_ttft / statistics.median(true_ttft) - 1) * 100,
        "server_side_ttft_p50_ms": arrival_ttft * 1e3,
        "true_tpot_p50_ms": statistics.median(true_tpot) * 1e3,
        "spectrn_tpot_p50_ms": got_tpot * 1e3,
        "tpot_err_pct": (got_tpot / statistics.median(true_tpot) - 1) * 100,
        "server_lag_p99_ms": sorted(sched_lag)[int(0.99 * (len(sched_lag) - 1))] * 1e3,
        "client_cpu_us_per_token": cpu / tok * 1e6 if tok else float("nan"),
        "tokens": tok,
    }


def main() -> None:
    import aiohttp  # noqa: F401  (import cost is not per-token work)

    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,16,64,256")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--ttft", type=float, default=0.1)
    ap.add_argument("--gap", type=float, default=0.03)
    ap.add_argument("--pattern", default="1", help="tokens per event, e.g. 3 for speculative-like chunks")
    ap.add_argument("--ramp", default="auto", help="closed-loop start: auto (the default) or seconds (0: all at once)")
    ap.add_argument("--conditions", default="as-is", help="comma-separated: as-is, quiet, loaded (one burner per core)")
    ap.add_argument("--repeat", type=int, default=1, help="how many times to alternate the conditions")
    a = ap.parse_args()
    conditions = [c.strip() for c in a.conditions.split(",")]
    ramp_s = None if a.ramp == "auto" else float(a.ramp)
    out = Path("benchmarks/results/loadgen_accuracy_runs") / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    server = start_reference(out / "server.log", ttft_s=a.ttft, gap_s=a.gap, pattern=a.pattern)
    base = server.url
    rows = []
    try:
        runs = [(c, cond, r) for r in range(a.repeat) for c in map(int, a.levels.split(",")) for cond in conditions]
        for c, cond, r in runs:
            burning = burners(os.cpu_count() or 1) if cond == "loaded" else []
            try:
                load_before = os.getloadavg()[0]
                row = run_level(base, c, a.tokens, out / f"{cond}-{r}", ramp_s)
                row.update(condition=cond, repeat=r, loadavg_1m_before=load_before, loadavg_1m_after=os.getloadavg()[0])
            finally:
                for p in burning:
                    p.kill()
            rows.append(row)
            print(
                f"[{cond} #{r} load {row['loadavg_1m_before']:.1f}->{row['loadavg_1m_after']:.1f}] "
                f"c={c:4d} n={row['requests']:4d} TTFT p50 true {row['true_ttft_p50_ms']:.2f} ms measured "
                f"{row['spectrn_ttft_p50_ms']:.2f} ms ({row['ttft_err_pct']:+.2f}%) | TPOT p50 true "
                f"{row['true_tpot_p50_ms']:.3f} ms measured {row['spectrn_tpot_p50_ms']:.3f} ms "
                f"({row['tpot_err_pct']:+.2f}%) | client CPU {row['client_cpu_us_per_token']:.1f} us/token | "
                f"server lag p99 {row['server_lag_p99_ms']:.2f} ms | server-side TTFT p50 "
                f"{row['server_side_ttft_p50_ms']:.2f} ms, spectrn vs it {row['ttft_err_vs_server_pct']:+.2f}% | "
                f"ramp {row['ramp_s']:g} s",
                flush=True,
            )
    finally:
        stop(server)
    res = Path("benchmarks/results")
    res.mkdir(exist_ok=True)
    suffix = f"_ramp{a.ramp}"  # the files without a suffix predate the option (all streams at once: --ramp 0)
    if conditions != ["as-is"]:
        suffix += "_" + "-".join(conditions)
    (res / f"loadgen_accuracy_pattern{a.pattern.replace(',', '-')}{suffix}.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
