"""The load generator against the simulator: measurements vs the simulator's ground truth, end to end."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from contract import assert_valid_run_folder
from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.run import analyze_folder
from spectrn.bench.local import execute, plan_from_config
from spectrn.cli.main import main
from spectrn.configuration.sources import build_config
from spectrn.run.records import read_records
from spectrn.runtimes.sim_pair import SimPair

TIME_SCALE = 0.2


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[dict]], dict]:
    """One A/B run at concurrency 1 (batch 1: every step's cost is known), completions API, unique prompts."""
    tmp = tmp_path_factory.mktemp("simrun")
    cfg = build_config(
        {
            "runtime": "sim",
            # upstream vLLM's protocol: token_ids per chunk and spec-decode counters that move (the Neuron
            # profiles' chunks and counters are checked in tests/sim/test_profiles.py)
            "sim": {"profile": "upstream"},
            "bench": {
                "prompts": "all",
                "requests": 18,
                "warmup": 1,
                "max_tokens": 120,
                "concurrency": [1],
                "api": "completions",
                "nonce": True,
            },
        }
    )
    with SimPair(cfg, tmp / "servers", time_scale=TIME_SCALE) as pair:
        plan = plan_from_config(cfg, dict(pair.endpoints), run_id="truth", out_root=tmp, model=pair.model)
        outcome = execute(plan, cfg, None, quiet=True)
        truth = {v: json.load(urllib.request.urlopen(f"{u}/sim/requests")) for v, u in pair.endpoints.items()}
    truth = {v: (t["requests"] if isinstance(t, dict) else t) for v, t in truth.items()}
    _, summary = analyze_folder(outcome.run_dir)
    return outcome.run_dir, truth, summary


def _by_prompt(truth: list[dict]) -> dict[str, dict]:
    return {t["prompt"]: t for t in truth}


def test_chunks_and_tokens_equal_what_the_simulator_emitted(sim_run) -> None:
    run_dir, truth, _ = sim_run
    recs = [r for r in read_records(run_dir / "requests.jsonl")]
    assert all(r.ok for r in recs)
    spec = _by_prompt(truth["speculative"])
    multi = 0
    diffs: list[float] = []
    gaps: list[float] = []
    for r in recs:
        if r.variant != "speculative":
            assert set(r.chunk_tokens) == {1}
            continue
        t = next(v for k, v in spec.items() if k.startswith(f"[truth-{r.index}] "))
        assert r.chunk_tokens == [c["n"] for c in t["chunks"]], r.prompt_id
        assert sum(r.chunk_tokens) == r.completion_tokens == 120
        multi += sum(1 for n in r.chunk_tokens if n > 1)
        # chunk arrival gaps equal the simulator's write gaps (same machine, monotonic clocks)
        sim_gaps = [b["written"] - a["written"] for a, b in zip(t["chunks"], t["chunks"][1:], strict=False)]
        cli_gaps = [b - a for a, b in zip(r.chunk_times, r.chunk_times[1:], strict=False)]
        diffs.extend(abs(x - y) for x, y in zip(sim_gaps, cli_gaps, strict=True))
        gaps.extend(sim_gaps)
    diffs.sort()
    gap = sorted(gaps)[len(gaps) // 2]
    # a busy 2-core machine delays single reads by milliseconds (median 2.3 ms, p95 9.4 ms, gaps of 13.7 ms, at
    # load average 5); a client that stamped chunks anywhere but at their read would be off by whole gaps, so the
    # bound is a share of one
    median, p95 = diffs[len(diffs) // 2], diffs[int(0.95 * (len(diffs) - 1))]
    assert median < max(0.002, 0.4 * gap), f"median gap error {median * 1e3:.2f} ms, median gap {gap * 1e3:.2f} ms"
    assert p95 < max(0.010, 0.8 * gap), f"p95 gap error {p95 * 1e3:.2f} ms, median gap {gap * 1e3:.2f} ms"
    assert multi > 0, "speculation must produce multi-token chunks"


def test_tpot_ttft_match_the_simulator_schedule(sim_run) -> None:
    run_dir, truth, _ = sim_run
    recs = read_records(run_dir / "requests.jsonl")
    for variant in ("baseline", "speculative"):
        by_p = _by_prompt(truth[variant])
        errs_tpot, errs_ttft = [], []
        for r in recs:
            if r.variant != variant or r.warmup:
                continue
            m = request_metrics(r)
            assert m is not None and m.tpot is not None
            t = next(v for k, v in by_p.items() if k.startswith(f"[truth-{r.index}] "))
            ch = t["chunks"]
            sched_tpot = (ch[-1]["t"] - ch[0]["t"]) / (t["emitted_tokens"] - 1)
            errs_tpot.append(m.tpot / sched_tpot - 1)
            errs_ttft.append(m.ttft - (ch[0]["t"] - t["arrival"]))
        errs_tpot.sort()
        errs_ttft.sort()
        # stated tolerance: median TPOT within 3% of the schedule, TTFT within 10 ms (HTTP + loop overhead)
        assert abs(errs_tpot[len(errs_tpot) // 2]) < 0.03, (variant, errs_tpot)
        assert -0.002 < errs_ttft[len(errs_ttft) // 2] < 0.010, (variant, errs_ttft)


def test_acceptance_counters_match_emitted_chunks_and_the_model(sim_run) -> None:
    _, truth, summary = sim_run
    lv = summary.levels[0]
    acc = lv.variants["speculative"].acceptance
    assert acc is not None and acc.source == "counters" and acc.counters is not None
    # the client's pooled tokens per decode event is the counters' mean acceptance length, up to the last
    # step of each request, whose accepted tokens are counted by the engine but cut at max_tokens
    assert lv.variants["speculative"].tokens_per_chunk_mean == pytest.approx(acc.mean_accepted_length, rel=0.05)
    assert lv.variants["baseline"].acceptance is None
    measured = [t for t in truth["speculative"] if not t["prompt"].startswith("[truth-0] ")]
    steps = sum(len(t["chunks"]) - 1 for t in measured)
    assert acc.counters.drafts == steps
    assert len(acc.per_position) == 7
    # per prompt class the realised acceptance length is close to the model's expectation
    for cls in ("structured", "open"):
        tpc = lv.by_prompt_class[cls].variants["speculative"].tokens_per_chunk_mean
        ts = [t for t in measured if (t["predictability"] > 0.5) == (cls == "structured")]
        expected = sum(119 for _ in ts) / sum(119 / t["expected_tokens_per_step"] for t in ts)
        assert tpc == pytest.approx(expected, rel=0.2), cls


def test_speculation_pays_on_structured_not_on_open(sim_run) -> None:
    _, _, s = sim_run
    lv = s.levels[0]

    def tpot_speedup(cls: str) -> float:
        sp = lv.by_prompt_class[cls].speedup
        assert sp is not None and sp.tpot_p50 is not None and sp.tpot_p50.value is not None
        return sp.tpot_p50.value

    # at batch 1 the preset's open prompts still gain a little; its published shape (about equal) is at
    # concurrency 4, checked by the simulator's calibration tests and the demo
    assert tpot_speedup("structured") > 2.0
    assert tpot_speedup("open") < 1.6
    assert tpot_speedup("structured") > tpot_speedup("open") + 0.8
    assert lv.equivalence is not None and lv.equivalence.match_rate == 1.0 and lv.equivalence.compared == 18
    # TTFT is not changed by speculation: the ratio is near 1, or its interval holds 1 (TTFTs of a few ms are
    # noisy on a loaded machine: 1.28 [0.90, 1.38] seen at load average 5)
    ttft = lv.speedup.ttft_p50 if lv.speedup is not None else None
    assert ttft is not None and ttft.value is not None and ttft.ci95 is not None
    assert 0.8 < ttft.value < 1.25 or (ttft.ci95[0] <= 1.0 <= ttft.ci95[1] and 0.67 < ttft.value < 1.5), ttft
    # llmperf's ITL differs from the true per-token ITL in the predicted direction: it overstates it
    v = lv.by_prompt_class["structured"].variants["speculative"]
    assert (v.llmperf_itl_s.p50 or 0) > 1.5 * (v.tpot_s.p50 or 1)


@pytest.mark.slow
def test_bench_cli_local_sim_end_to_end(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        main(
            [
                "bench",
                "--local",
                "--runtime",
                "sim",
                "--time-scale",
                "0.1",
                "--prompts",
                "all",
                "--requests",
                "18",
                "--max-tokens",
                "100",
                "--run-id",
                "cli",
                "--out-dir",
                str(tmp_path),
            ]
        )
    assert e.value.code == 0
    s = assert_valid_run_folder(tmp_path / "cli")
    # at time scale 0.1 the simulator runs 10x fast; every figure the user reads is real time, and says so
    tpot = s["levels"][0]["variants"]["baseline"]["tpot_s"]["p50"]
    assert 0.03 < tpot < 0.08, tpot  # the preset's ~45 ms baseline step, not the 4.5 ms of the wall clock
    said = "simulated at time scale 0.1: figures rescaled to real time"
    assert said in (tmp_path / "cli" / "report" / "summary.md").read_text()
    page = (tmp_path / "cli" / "report" / "index.html").read_text()
    assert said in page and f"{tpot * 1000:.1f}" in page
    structured = s["levels"][0]["by_prompt_class"]["structured"]["speedup"]["tpot_p50"]["value"]
    assert s["verdict"]["clean"] and structured > 1.5
    assert (tmp_path / "cli" / "metrics.emf.jsonl").exists()
    assert any((tmp_path / "cli" / "speculative").glob("*_individual_responses.json"))
