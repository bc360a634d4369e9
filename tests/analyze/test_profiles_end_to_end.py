"""What a trn2 user sees, end to end through real HTTP, on each server profile of the simulator: tokens per
event equal the simulator's ground truth (/sim/requests) even where the server gives no token ids and holds
text back, and acceptance read from the stream matches the simulator's acceptance model per prompt class."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from spectrn.analyze.run import analyze_folder
from spectrn.bench.local import endpoint_provenance, execute, plan_from_config
from spectrn.configuration.sources import build_config
from spectrn.run.records import read_records
from spectrn.sim import SimSettings, run_in_thread

pytestmark = pytest.mark.slow
WINDOW = 7


def _run(tmp: Path, profile: str) -> tuple[Path, dict[str, list[dict]]]:
    cfg = build_config(
        {
            "runtime": "sim",
            "num_speculative_tokens": WINDOW,
            "bench": {"prompts": "all", "requests": 32, "warmup": 0, "max_tokens": 160, "concurrency": [4],
                      "api": "completions", "nonce": True},
        }
    )  # fmt: skip
    base = run_in_thread(SimSettings(time_scale=0.05, profile=profile))
    spec = run_in_thread(SimSettings(time_scale=0.05, profile=profile, speculative=True, window=WINDOW))
    try:
        eps = {"baseline": base.base_url, "speculative": spec.base_url}
        prov = endpoint_provenance(cfg, eps, runtime="sim", started=True, profile=profile, time_scale=0.05)
        plan = plan_from_config(cfg, eps, run_id=f"p-{profile}", out_root=tmp, model="Qwen/Qwen3-32B",
                                provenance=prov)  # fmt: skip
        run_dir = execute(plan, cfg, None, quiet=True).run_dir
        truth = {v: json.load(urllib.request.urlopen(f"{u}/sim/requests")) for v, u in eps.items()}
    finally:
        base.stop()
        spec.stop()
    return run_dir, {v: (t["requests"] if isinstance(t, dict) else t) for v, t in truth.items()}


@pytest.mark.parametrize("profile", ["neuron-fork", "vllm-neuron", "upstream"])
def test_tokens_per_event_and_stream_acceptance_match_the_simulator(tmp_path: Path, profile: str) -> None:
    run_dir, truth = _run(tmp_path, profile)
    recs = read_records(run_dir / "requests.jsonl")
    assert recs and all(r.ok for r in recs)
    for variant in ("baseline", "speculative"):
        by_prompt = {t["prompt"]: t for t in truth[variant]}
        for r in (x for x in recs if x.variant == variant):
            t = next(v for k, v in by_prompt.items() if k.startswith(f"[p-{profile}-{r.index}] "))
            assert r.chunk_tokens == [c["n"] for c in t["chunks"]], (profile, variant, r.index)
            # token ids only where the server sends them; otherwise exact counts from cumulative usage
            # token ids where the server sends them (V1: upstream, vllm-neuron), else exact cumulative usage
            assert r.token_source == ("usage" if profile == "neuron-fork" else "token_ids")
    _, s = analyze_folder(run_dir)
    lv = s.levels[0]
    spec = lv.variants["speculative"].acceptance
    assert spec is not None
    if profile == "upstream":
        assert spec.source == "counters" and spec.agreement is not None and "DISAGREE" not in spec.agreement
    else:
        assert spec.source == "stream" and spec.counters is None  # never "not reported" on Neuron servers
    assert spec.stream is not None and spec.stream.semantics == ("upstream" if profile == "upstream" else "nxdi")
    assert spec.stream.coalesced_events == 0
    for cls in ("structured", "open"):
        cs = lv.by_prompt_class[cls].variants["speculative"].acceptance
        assert cs is not None and cs.source == "stream" and cs.mean_accepted_length is not None
        indices = {r.index for r in recs if r.variant == "speculative" and r.prompt_class == cls}
        mine = [t for t in truth["speculative"] if int(t["prompt"].split("]")[0].rsplit("-", 1)[1]) in indices]
        steps = sum(len(t["chunks"]) - 2 for t in mine)  # the prefill event and the cut last one are not steps
        expected = sum((len(t["chunks"]) - 2) * t["expected_tokens_per_step"] for t in mine) / steps
        assert cs.mean_accepted_length == pytest.approx(expected, rel=0.03), (profile, cls)
