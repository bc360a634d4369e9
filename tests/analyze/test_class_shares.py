"""Per-class throughput and cost at a load above the batch limit, against the simulator's own ground truth.

16 streams on servers with 4 decode slots (the simulator's max_num_seqs): three quarters of each request's e2e
is queueing, and streams drain unevenly. The oracle is what the servers themselves logged (GET /sim/requests:
every request's prompt, tokens emitted and when each chunk was written), read here in the test only; the
definitions are docs/benchmarks.md's: a class's throughput is its tokens over the level's wall, its cost its
share of that wall by the slot-seconds (first to last token) its requests held.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from spectrn.loadgen.prompts import load_prompt_set
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Summary
from spectrn.sim import SimSettings, run_in_thread
from support import run_cli

pytestmark = pytest.mark.slow

REQUESTS = 48


def _truth(url: str, measured: int, class_of: dict[str, str]) -> dict[str, Any]:
    """The server's own figures for its measured requests (the warm-ups arrive first and are dropped)."""
    with urllib.request.urlopen(url + "/sim/requests") as r:
        log = sorted(json.load(r)["requests"], key=lambda q: q["counter"])
    assert len(log) >= measured
    log = log[len(log) - measured :]
    start = min(q["arrival"] for q in log)
    end = max(q["chunks"][-1]["written"] for q in log)
    tokens: dict[str, float] = {}
    slots: dict[str, float] = {}
    for q in log:
        c = class_of[q["prompt"]]
        tokens[c] = tokens.get(c, 0.0) + q["emitted_tokens"]
        slots[c] = slots.get(c, 0.0) + q["chunks"][-1]["written"] - q["chunks"][0]["written"]
    return {"wall": end - start, "tokens": tokens, "slots": slots}


def test_class_throughput_and_cost_above_the_batch_limit_match_the_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = load_prompt_set("all")
    class_of = {p.text: p.prompt_class for p in prompts.prompts}
    base = run_in_thread(SimSettings(time_scale=0.05, max_num_seqs=4))
    spec = run_in_thread(SimSettings(time_scale=0.05, max_num_seqs=4, speculative=True, window=7))
    try:
        code, _, err = run_cli(
            ["bench", "--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}",
             "--concurrency", "16", "--requests", REQUESTS, "--max-tokens", "48", "--prompts", "all",
             "--out-dir", tmp_path, "--run-id", "r", "--no-report", "--set", "bench.nonce=false"],
            capsys,
        )  # fmt: skip
        assert code == 0, err
        truths = {v: _truth(h.base_url, REQUESTS, class_of) for v, h in (("baseline", base), ("speculative", spec))}
    finally:
        base.stop()
        spec.stop()
    s: Summary = RunFolder.open(tmp_path / "r").require_summary()
    (level,) = s.levels
    assert set(level.by_prompt_class) == {"open", "structured"}
    for v, truth in truths.items():
        pooled = level.variants[v]
        assert pooled.output_tokens_per_s.aggregate is not None and pooled.cost is not None
        price = pooled.cost.instance_hourly_usd * pooled.cost.instances_per_service
        class_tok_s = []
        class_cost = []
        for c, cs in level.by_prompt_class.items():
            vs = cs.variants[v]
            thr, cost = vs.output_tokens_per_s, vs.cost
            assert thr.aggregate is not None and thr.aggregate_ci95 is not None and cost is not None
            assert cost.usd_per_million_output_tokens is not None and cost.usd_per_million_output_tokens_ci95
            # no class delivers more than all classes together
            assert thr.aggregate <= pooled.output_tokens_per_s.aggregate, (v, c)
            true_tok_s = truth["tokens"][c] / truth["wall"]
            lo, hi = thr.aggregate_ci95
            assert lo <= true_tok_s <= hi, (v, c, true_tok_s, thr)
            billed = truth["wall"] * truth["slots"][c] / sum(truth["slots"].values())
            true_cost = price * billed / 3600 / truth["tokens"][c] * 1e6
            lo, hi = cost.usd_per_million_output_tokens_ci95
            assert lo <= true_cost <= hi, (v, c, true_cost, cost)
            class_tok_s.append(thr.aggregate)
            class_cost.append(cost.usd_per_million_output_tokens)
        # the classes are shares of the pool: their tokens/s sum to it, the pooled $/M lies between theirs
        assert sum(class_tok_s) == pytest.approx(pooled.output_tokens_per_s.aggregate, rel=1e-9)
        assert pooled.cost.usd_per_million_output_tokens is not None
        assert min(class_cost) <= pooled.cost.usd_per_million_output_tokens <= max(class_cost)
    # the cost ratio of a class is its own, from its billed time: baseline $/M / speculative $/M
    for cs in level.by_prompt_class.values():
        b, sp = cs.variants["baseline"].cost, cs.variants["speculative"].cost
        assert cs.speedup is not None and cs.speedup.cost is not None and b and sp
        assert b.usd_per_million_output_tokens and sp.usd_per_million_output_tokens
        assert cs.speedup.cost.value == pytest.approx(
            b.usd_per_million_output_tokens / sp.usd_per_million_output_tokens, rel=1e-9
        )
