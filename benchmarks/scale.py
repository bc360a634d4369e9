"""Scale: analysis memory and time from 10k to 1M records, open-loop scheduling memory, the simulator's schedule
at 1/64/256 streams, and the client's accuracy at 1/16/64/256 streams, all in one run.

    .venv/bin/python benchmarks/scale.py [--sizes 10000,100000,1000000] [--open-loop 500000] [--quick]

Parts (each in its own process, so peak RSS is that part's own):
- commands: ``spectrn analyze RUN`` (summary, llmperf-compatible files, EMF, report), ``spectrn report RUN``
  and ``spectrn publish --emf RUN``, each run as a process on a folder of N realistic records (per-chunk
  times and token counts, output texts and token ids, both variants, three prompt classes): peak RSS of the
  command's process tree and wall time per size.
- analysis: a run folder of N synthetic records (generated, not run: two variants, two prompt classes, 64
  output tokens; speculative events of 1-4 tokens) is analysed by ``spectrn.analyze.run.analyze_folder``;
  time and peak RSS per size.
- open loop: ``run_bench`` schedules 500,000 open-loop requests at a rate so high that the run is cut after a
  fixed time: peak RSS against the same run with 5,000 scheduled requests (memory must not depend on it).
- simulator: ``benchmarks/sim_schedule.py`` at 1, 64 and 256 streams (chunk deviation from the schedule).
- client: ``benchmarks/loadgen_accuracy.py`` at 1, 16, 64 and 256 streams against the exact-schedule reference
  server (TTFT and TPOT error, client CPU per token) with the default load shape.

Writes benchmarks/results/scale.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _child_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_child(code: str, *args: str, timeout: float = 3600) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it prints one JSON object, to which its own peak RSS is added."""
    cmd = [sys.executable, "-c", code, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# ---- analysis at 10k .. 1M records ------------------------------------------------------------------------


CLASSES = ("open", "structured", "code")
WORDS = ("the", "model", "token", "draft", "accept", "value", "return", "{", "}", "data", "serve", "fast")


def write_run(folder: Path, n_records: int, seed: int = 1, *, realistic: bool = True) -> None:
    """A run folder with ``n_records`` synthetic records (half per variant, three prompt classes, per-chunk
    times and token counts; ``realistic``: with output texts and token ids, as a run that keeps outputs),
    streamed to disk."""
    from spectrn.run.records import RunMeta

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    start = 1_790_000_000.0
    tokens = 64
    with (folder / "requests.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n_records):
            variant = "baseline" if i % 2 == 0 else "speculative"
            index = i // 2
            cls = CLASSES[index % len(CLASSES)]
            ttft = 0.05 + rng.random() * 0.01
            times, toks, t, left = [round(ttft, 6)], [1], ttft, tokens - 1
            while left > 0:
                k = 1 if variant == "baseline" else min(left, rng.randint(1, 4 if cls == "structured" else 2))
                t += (0.045 if variant == "baseline" else 0.055) + rng.random() * 0.002
                times.append(round(t, 6))
                toks.append(k)
                left -= k
            rec = {
                "variant": variant, "index": index, "prompt_id": f"p{index % 50}", "prompt_class": cls,
                "level": "c64", "sent_at": start + index * 0.05, "ttft": times[0], "e2e": round(t + 0.001, 6),
                "chunk_times": times, "chunk_tokens": toks, "token_source": "usage", "completion_tokens": tokens,
                "prompt_tokens": 64, "status": 200, "finish_reason": "length",
            }  # fmt: skip
            if realistic:  # what a kept output adds: the text and the token ids of every record
                ids = [rng.randrange(32_000) for _ in range(tokens)]
                rec["output_token_ids"] = ids
                rec["output_text"] = " ".join(WORDS[i % len(WORDS)] for i in ids)
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    meta = RunMeta(run_id=folder.name, spectrn_version="bench", started_at=start, finished_at=start + n_records)
    (folder / "run.json").write_text(meta.model_dump_json(indent=2))


ANALYSE = """
import json, resource, sys, time
from pathlib import Path
from spectrn.analyze.run import analyze_folder
t = time.perf_counter()
folder, s = analyze_folder(Path(sys.argv[1]))
dt = time.perf_counter() - t
lv = s.levels[0]
print(json.dumps({"seconds": dt, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "completed": sum(v.requests.completed for v in lv.variants.values()),
                  "itl_p50_ms": lv.variants["speculative"].itl_s.p50 * 1e3}))
"""


def analysis(sizes: list[int], work: Path) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        folder = work / f"records-{n}"
        if not (folder / "requests.jsonl").exists():
            t = time.perf_counter()
            write_run(folder, n)
            gen = time.perf_counter() - t
        else:
            gen = None
        out = run_child(ANALYSE, str(folder))
        size_mb = (folder / "requests.jsonl").stat().st_size / 1e6
        row = {"records": n, "file_mb": round(size_mb, 1), "generate_s": gen and round(gen, 1), **out}
        row["us_per_record"] = round(out["seconds"] / n * 1e6, 1)
        rows.append(row)
        print(
            f"analysis {n:>9,} records ({size_mb:,.0f} MB): {out['seconds']:7.1f} s, "
            f"{row['us_per_record']:6.1f} us/record, peak RSS {out['peak_rss_mib']:6.0f} MiB",
            flush=True,
        )
    return rows


# ---- the commands users run, as processes -------------------------------------------------------------------

# A fresh wrapper per command: RUSAGE_CHILDREN's ru_maxrss is then the peak RSS of the largest process of that
# command's tree (and nothing measured before it).
MEASURE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
dt = time.perf_counter() - t
print(json.dumps({"rc": proc.returncode, "seconds": dt, "stderr": proc.stderr[-2000:],
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

COMMANDS = {
    "analyze": ["analyze", "{run}", "-o", "json"],  # summary, llmperf files, EMF, report: finish()
    "report": ["report", "{run}", "--no-table"],
    "publish --emf": ["publish", "--emf", "{run}"],
    # every datum and every PutMetricData call built, nothing sent: the memory of a publish is in building them
    "publish --dry-run": ["publish", "--dry-run", "{run}"],
}


def commands(sizes: list[int], work: Path, which: list[str], max_size: dict[str, int]) -> list[dict[str, Any]]:
    """``spectrn analyze|report|publish --emf`` on run folders of realistic records, each command its own
    process: peak RSS and wall time."""
    spectrn = str(Path(sys.executable).with_name("spectrn"))
    rows = []
    for n in sizes:
        folder = work / f"records-{n}"
        if not (folder / "requests.jsonl").exists():
            write_run(folder, n)
        size_mb = (folder / "requests.jsonl").stat().st_size / 1e6
        for name in which:
            if n > max_size.get(name, n):
                continue
            argv = [spectrn, *(a.replace("{run}", str(folder)) for a in COMMANDS[name])]
            out = run_child(MEASURE, *argv)
            if out["rc"] != 0:
                raise SystemExit(f"`spectrn {name}` failed ({out['rc']}): {out['stderr']}")
            row = {"command": f"spectrn {name}", "records": n, "file_mb": round(size_mb, 1),
                   "seconds": round(out["seconds"], 1), "peak_rss_mib": round(out["peak_rss_mib"], 1),
                   "us_per_record": round(out["seconds"] / n * 1e6, 1)}  # fmt: skip
            rows.append(row)
            print(f"spectrn {name:<13} {n:>9,} records ({size_mb:,.0f} MB): {out['seconds']:7.1f} s, "
                  f"{row['us_per_record']:6.1f} us/record, peak RSS {out['peak_rss_mib']:6.0f} MiB",
                  flush=True)  # fmt: skip
    return rows


# ---- open-loop scheduling memory ----------------------------------------------------------------------------

OPEN_LOOP = """
import asyncio, json, resource, sys, time
from pathlib import Path
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
from spectrn.loadgen.plan import RunPlan
from spectrn.loadgen.runner import Level, run_bench

n, url, run_s = int(sys.argv[1]), sys.argv[3], float(sys.argv[4])
prompts = PromptSet(name="ol", prompts=[Prompt(id=f"p{i}", prompt_class="c", text=f"prompt {i}") for i in range(10)])
schedule = build_schedule(prompts, requests=n, warmup=0, seed=0, nonce="ol")  # what spectrn bench builds
plan = RunPlan(run_id="ol", out_dir=Path(sys.argv[2]), endpoints={"ep": url}, schedule=schedule,
               params=RequestParams(model="ref-model", api="completions", max_tokens=4, keep_output=False),
               levels=[Level.open(400.0, max_in_flight=64)])
base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
async def main():
    task = asyncio.ensure_future(run_bench(plan))
    await asyncio.sleep(run_s)
    tasks = len(asyncio.all_tasks())
    task.cancel()
    try:
        await task
    except BaseException:
        pass
    return tasks
t = time.perf_counter()
tasks = asyncio.run(main())
lines = sum(1 for _ in (Path(sys.argv[2]) / "requests.jsonl").open())
print(json.dumps({"scheduled": n, "seconds": time.perf_counter() - t, "tasks_alive": tasks, "sent": lines,
                  "rss_after_schedule_built_mib": base_rss,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _reference_server() -> tuple[subprocess.Popen[bytes], str]:
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = HERE.parent / "tests" / "doubles" / "reference_server.py"
    cmd = [sys.executable, str(server), "--port", str(port), "--ttft", "0.001", "--gap", "0.0005", "--pattern", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=1).read()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the reference server did not start")


def open_loop(n: int, work: Path, run_s: float) -> list[dict[str, Any]]:
    """The same open-loop run (400 req/s for ``run_s`` seconds, then stopped) with 5,000 and with ``n``
    requests scheduled: what the process holds must not grow with what is merely scheduled."""
    import shutil

    rows = []
    proc, url = _reference_server()
    try:
        for size in (5_000, n):
            out_dir = work / f"open-{size}"
            shutil.rmtree(out_dir, ignore_errors=True)
            out = run_child(OPEN_LOOP, str(size), str(out_dir), url, str(run_s))
            rows.append(out)
            print(f"open loop {size:>9,} scheduled: peak RSS {out['peak_rss_mib']:6.0f} MiB "
                  f"(after building the schedule {out['rss_after_schedule_built_mib']:.0f} MiB), {out['sent']} sent, "
                  f"{out['tasks_alive']} tasks alive after {run_s:g} s", flush=True)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(10)
    return rows


# ---- simulator schedule and client accuracy (the dedicated benchmarks) --------------------------------------


def sub_benchmark(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"FAILED ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--open-loop", type=int, default=500_000)
    ap.add_argument("--open-loop-seconds", type=float, default=8.0)
    ap.add_argument("--work", type=Path, default=RESULTS / "scale_work")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: commands,analysis,open-loop,sim,client")
    ap.add_argument("--out", type=Path, default=RESULTS / "scale.json", help="where to write the results")
    ap.add_argument(
        "--commands", default="analyze,report,publish --emf,publish --dry-run", help="which commands to measure"
    )
    ap.add_argument(
        "--command-max", default="", help="per command, the largest size to run it at, e.g. 'report=100000'"
    )
    ap.add_argument("--quick", action="store_true", help="sizes 10k,100k; open loop 50k; shorter sub-benchmarks")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    sizes = [int(x) for x in args.sizes.split(",")] if not args.quick else [10_000, 100_000]
    result: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    args.work.mkdir(parents=True, exist_ok=True)
    if "commands" not in skip:
        max_size = {k: int(v) for k, v in (x.split("=") for x in filter(None, args.command_max.split(",")))}
        which = [c.strip() for c in args.commands.split(",") if c.strip()]
        result["commands"] = commands(sizes, args.work, which, max_size)
    if "analysis" not in skip:
        result["analysis"] = analysis(sizes, args.work)
    if "open-loop" not in skip:
        result["open_loop"] = open_loop(50_000 if args.quick else args.open_loop, args.work, args.open_loop_seconds)
    if "sim" not in skip:
        result["simulator"] = sub_benchmark("sim_schedule.py", "--streams", "1", "64", "256")
        print(result["simulator"], flush=True)
    if "client" not in skip:
        result["client"] = sub_benchmark("loadgen_accuracy.py", "--levels", "1,16,64,256", "--pattern", "1")
        print(result["client"], flush=True)
    result["load_average"] = list(__import__("os").getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
