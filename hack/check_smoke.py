"""Assert what the kind smoke test must show: speculation faster on structured prompts, acceptance reported.

Usage: python hack/check_smoke.py results/<run-id>/summary.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def check(summary: dict) -> list[str]:
    problems = []
    speedup = ((summary.get("speedup") or {}).get("tpot_p50") or {}).get("value")
    if not isinstance(speedup, (int, float)) or speedup <= 1.0:
        problems.append(f"speedup.tpot_p50.value is {speedup!r}: speculation was not faster on structured prompts")
    spec = (summary.get("variants") or {}).get("speculative") or {}
    acceptance = spec.get("acceptance")
    if not acceptance or acceptance.get("rate") is None:
        problems.append(f"variants.speculative.acceptance is {acceptance!r}: acceptance was not reported")
    done = ((spec.get("requests") or {}).get("completed")) or 0
    if done <= 0:
        problems.append("variants.speculative.requests.completed is 0: no request finished")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(argv[1])
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        print(f"kind-smoke: cannot read {path}: {e}", file=sys.stderr)
        return 1
    problems = check(summary)
    for p in problems:
        print(f"kind-smoke: FAIL: {p}", file=sys.stderr)
    if not problems:
        speedup = summary["speedup"]["tpot_p50"]["value"]
        rate = summary["variants"]["speculative"]["acceptance"]["rate"]
        print(f"kind-smoke: OK: TPOT p50 speedup {speedup:.2f}x, acceptance rate {rate:.2f}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
