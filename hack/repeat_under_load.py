"""Run the same tests N times in a row beside a CPU load, and say how each run went (flaky-test checks).

    python hack/repeat_under_load.py --runs 20 --busy 2 -- tests/twin/test_recovery.py tests/sweep/test_sweep_sim_e2e.py

Beside the runs, ``--busy`` processes spin on the CPU (default: one per core), so every test shares the machine
with work it does not control. Each run is a fresh ``pytest`` process; its outcome, duration and the 1-minute load
average at its end go to stdout as a table and, with ``--out``, as JSON lines. Stops at the first failure with
``--stop-on-fail``; the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _spin(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="spinning processes beside the runs")
    ap.add_argument("--out", type=Path, help="append one JSON line per run here")
    ap.add_argument("--stop-on-fail", action="store_true")
    ap.add_argument("tests", nargs="+", help="pytest arguments (test files or node ids)")
    args = ap.parse_args(argv)

    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    failed = done = 0
    try:
        print(f"{'run':>4} {'outcome':>8} {'seconds':>8} {'load1':>6}", flush=True)
        for i in range(1, args.runs + 1):
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args.tests],
                capture_output=True,
                text=True,
                check=False,
            )
            took = time.monotonic() - t0
            load = os.getloadavg()[0]
            ok = proc.returncode == 0
            done += 1
            failed += not ok
            tail = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
            print(f"{i:>4} {'passed' if ok else 'FAILED':>8} {took:>8.1f} {load:>6.2f}  {' '.join(tail)}", flush=True)
            if args.out is not None:
                with args.out.open("a", encoding="utf-8") as f:
                    row = {"run": i, "passed": ok, "seconds": round(took, 1), "load1": round(load, 2),
                           "busy": args.busy, "tests": args.tests, "summary": tail}  # fmt: skip
                    if not ok:
                        row["output"] = proc.stdout[-20_000:]
                    f.write(json.dumps(row) + "\n")
            if not ok:
                print(proc.stdout[-5000:], flush=True)
                if args.stop_on_fail:
                    break
    finally:
        stop.set()
        for p in spinners:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    print(f"{done - failed} of {done} runs passed, {failed} failed (busy processes: {args.busy})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
