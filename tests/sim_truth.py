"""A client with a perfect clock, for the tests of what spectrn fits from timings (the twin, the sweep's predictor).

The simulator keeps every request's schedule: when the request arrived and when each of its chunks was due
(``GET /sim/requests``, the engine's ground truth). On a quiet machine the client sees that schedule within a
fraction of a millisecond (``benchmarks/loadgen_accuracy.py``); on a loaded 2-core machine both the simulator
and the client run late by milliseconds, and not at random: a starved simulator falls behind its deadlines for
whole stretches, so steps of 3-25 ms (time scale 0.1-0.2) stretch by a systematic share. A test that asks a fit
for the simulator's hidden costs within 5% then fails for a reason that is not in the fit.

``replay_schedule`` gives such a test the measurements a client with a perfect clock would have made: each record
of a finished bench keeps everything the client measured except its times, which become the server's schedule
(``sent_at`` at the server's arrival, each token-bearing chunk at its scheduled time, e2e at the last one). The
client's own token counts are checked against the server's chunk for chunk, not replaced, so a client that
miscounted still fails. Only tests use this channel: spectrn itself never reads ``/sim/requests`` to measure.

The clocks: the client stamps ``sent_at`` with ``spectrn.loadgen.clock.wall_now`` (the epoch anchored to
``time.perf_counter``) and the simulator stamps with ``time.monotonic``; on Linux both read CLOCK_MONOTONIC, one
clock for every process, so a server time plus ``wall_now() - perf_counter()`` of the bench's own process is the
client's wall time of the same instant. The bench must therefore have run in this process (``execute`` or
``main`` called from the test), which is how the twin and sweep tests run it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from spectrn.loadgen.clock import wall_now
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord

# a server arrival can only follow the client's send: by the request's trip through the loopback and the server's
# handler, milliseconds on a loaded machine; a few seconds leaves room for a very loaded one and still cannot
# reach the same prompt's next request of the same shape in a closed loop
MAX_SEND_TO_ARRIVAL_S = 5.0


def ground_truth(url: str) -> list[dict[str, Any]]:
    """Every request the simulator at ``url`` still remembers, oldest first."""
    with urllib.request.urlopen(f"{url}/sim/requests", timeout=30) as resp:  # noqa: S310 (loopback, a test's server)
        body = json.load(resp)
    assert body["clock"] == "monotonic", body["clock"]
    return sorted(body["requests"], key=lambda r: r["counter"])


def _chunks(truth: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in truth["chunks"] if c["n"] > 0]


def _shape(tokens: list[int] | tuple[int, ...], prompt_tokens: int | None) -> tuple[int | None, tuple[int, ...]]:
    return prompt_tokens, tuple(tokens)


def replayed(records: list[RequestRecord], truths: list[dict[str, Any]], offset: float) -> list[RequestRecord]:
    """``records`` of one server with their times replaced by the schedule in ``truths`` (see the module)."""
    pool: dict[tuple[int | None, tuple[int, ...]], list[dict[str, Any]]] = defaultdict(list)
    for t in truths:
        pool[_shape([c["n"] for c in _chunks(t)], t["prompt_tokens"])].append(t)
    out = []
    for rec in sorted(records, key=lambda r: r.sent_at):
        if rec.error is not None or not rec.chunk_times:
            out.append(rec)
            continue
        key = _shape(rec.chunk_tokens, rec.prompt_tokens)
        # the first request of this shape that reached the server after this record was sent
        lo, hi = rec.sent_at - 1e-3, rec.sent_at + MAX_SEND_TO_ARRIVAL_S
        fits = [t for t in pool[key] if lo <= t["arrival"] + offset <= hi]
        assert fits, (
            f"no request on the server has the client's shape for {rec.variant} #{rec.index} ({rec.prompt_id}): "
            f"prompt tokens {rec.prompt_tokens}, chunk tokens {rec.chunk_tokens[:12]}..."
        )
        truth = min(fits, key=lambda t: t["arrival"])
        pool[key].remove(truth)
        arrival = truth["arrival"]
        times = [c["t"] - arrival for c in _chunks(truth)]
        last = max(c["t"] for c in truth["chunks"]) - arrival
        out.append(
            rec.model_copy(
                update={
                    "sent_at": arrival + offset,
                    "chunk_times": times,
                    "ttft": times[0],
                    "e2e": last if rec.e2e is not None else None,
                }
            )
        )
    return out


def replay_schedule(run_dir: Path, urls: dict[str, str]) -> int:
    """Rewrite the records of ``run_dir`` (a bench of the simulators at ``urls``, by variant, run in this process)
    with the servers' schedule; the number of records rewritten. Call it before the run is analysed."""
    offset = wall_now() - time.perf_counter()
    folder = RunFolder.open(run_dir)
    records = list(folder.records(measured=False))
    out: list[RequestRecord] = []
    for variant, url in urls.items():
        mine = [r for r in records if r.variant == variant]
        out += replayed(mine, ground_truth(url), offset)
    assert len(out) == len(records), "the run has records of a variant with no simulator given"
    out.sort(key=lambda r: r.sent_at)
    folder.write_records(out)
    return sum(1 for r in out if r.error is None and r.chunk_times)
