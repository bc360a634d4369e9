"""Run orchestration: schedules, load shapes, sharding, shaping, interruption, endpoint checks."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from doubles.reference_server import Schedule, serve_in_thread
from spectrn.errors import BenchError, EndpointError
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.plan import RunPlan
from spectrn.loadgen.prompts import build_schedule, load_prompt_set
from spectrn.loadgen.runner import Level, poisson_arrivals, run_bench
from spectrn.run.records import read_records


def plan(
    tmp: Path,
    eps: dict[str, str],
    *,
    n: int = 8,
    warmup: int = 1,
    levels=None,
    mode: str = "simultaneous",
    shard: int = 0,
    shards: int = 1,
    model: str = "ref-model",
    run_id: str = "r",
) -> RunPlan:
    ps = load_prompt_set("all")
    return RunPlan(
        run_id=run_id,
        out_dir=tmp / run_id,
        endpoints=eps,
        schedule=build_schedule(ps, requests=n, warmup=warmup, seed=1),
        params=RequestParams(model=model, api="completions", max_tokens=12),
        levels=levels or [Level.closed(2)],
        mode=mode,
        shard=shard,
        shards=shards,
    )


FAST = Schedule(ttft_s=0.01, gap_s=0.002, pattern=(1,))


def test_both_endpoints_get_the_identical_schedule(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, la), serve_in_thread(Schedule(0.01, 0.002, (3,))) as (b, lb):
        out = asyncio.run(run_bench(plan(tmp_path, {"baseline": a, "speculative": b})))
        prompts_a = sorted(r["prompt"] for r in la.requests)
        prompts_b = sorted(r["prompt"] for r in lb.requests)
    assert prompts_a == prompts_b and len(prompts_a) == 9
    recs = read_records(out.run_dir / "requests.jsonl")
    for v in ("baseline", "speculative"):
        assert sorted((r.index, r.prompt_id) for r in recs if r.variant == v) == sorted(
            (r.index, r.prompt_id) for r in recs if r.variant == "baseline"
        )
    assert sum(r.warmup for r in recs) == 2
    assert out.counts["speculative"] == {"completed": 8, "errors": 0, "warmup": 1}
    run = json.loads((out.run_dir / "run.json").read_text())
    assert run["finished_at"] and not run["interrupted"] and run["model"] == "ref-model"
    assert (out.run_dir / "metrics" / "speculative.c2.before.prom").exists()
    acc = json.loads((out.run_dir / "acceptance.json").read_text())
    assert acc["speculative@c2"]["mean_accepted_length"] > 2


def test_interleaved_mode_alternates_blocks(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, la), serve_in_thread(FAST) as (b, lb):
        asyncio.run(run_bench(plan(tmp_path, {"baseline": a, "speculative": b}, mode="interleaved", warmup=0)))
        arrivals = sorted([(r["arrival"], "a") for r in la.requests] + [(r["arrival"], "b") for r in lb.requests])
    order = "".join(x for _, x in arrivals)
    assert order == "aabbaabbaabbaabb"


def test_poisson_arrivals_are_seeded_and_have_the_rate() -> None:
    xs = list(itertools.islice(poisson_arrivals(4.0, seed=3), 2000))
    assert xs == list(itertools.islice(poisson_arrivals(4.0, seed=3), 2000))
    assert xs[-1] / 2000 == pytest.approx(0.25, rel=0.08)


def test_open_loop_level(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, _):
        out = asyncio.run(run_bench(plan(tmp_path, {"baseline": a}, levels=[Level.open(40.0)], warmup=0)))
    recs = read_records(out.run_dir / "requests.jsonl")
    assert len(recs) == 8 and {r.level for r in recs} == {"r40"}


def test_shards_split_the_schedule(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, _):
        for shard in (0, 1, 2):
            asyncio.run(
                run_bench(plan(tmp_path, {"baseline": a}, n=9, warmup=0, shard=shard, shards=3, run_id=f"s{shard}"))
            )
    idx = [sorted(r.index for r in read_records(tmp_path / f"s{k}" / "requests.jsonl")) for k in range(3)]
    assert sorted(i for part in idx for i in part) == list(range(9))
    assert all(r.shard == 1 for r in read_records(tmp_path / "s1" / "requests.jsonl"))


def test_input_length_shaping_uses_tokenize(tmp_path: Path) -> None:
    async def go() -> list[str]:
        with serve_in_thread(FAST) as (a, la):
            await run_bench(plan(tmp_path, {"baseline": a}, n=3, warmup=0), input_tokens=50)
            return [r["prompt"] for r in la.requests]

    prompts = asyncio.run(go())
    # the reference server's /tokenize counts whitespace-separated words
    assert all(len(p.split()) == 50 for p in prompts)
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert any("shaped to 50 tokens" in n for n in run["notes"])


def test_unknown_model_is_refused_before_the_run(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, _), pytest.raises(EndpointError, match="not model 'other'"):
        asyncio.run(run_bench(plan(tmp_path, {"baseline": a}, model="other")))


def test_unreachable_endpoint_aborts_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(EndpointError, match="unreachable") as e:
        asyncio.run(run_bench(plan(tmp_path, {"baseline": "http://127.0.0.1:1"})))
    assert e.value.hint and "curl" in e.value.hint


def test_model_is_discovered_from_v1_models(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, _):
        out = asyncio.run(run_bench(plan(tmp_path, {"baseline": a}, model="")))
    assert json.loads((out.run_dir / "run.json").read_text())["model"] == "ref-model"


def test_existing_run_folder_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "requests.jsonl").write_text("keep me\n")
    with pytest.raises(BenchError, match="already holds a run"):
        asyncio.run(run_bench(plan(tmp_path, {"baseline": "http://127.0.0.1:1"})))
    assert (tmp_path / "r" / "requests.jsonl").read_text() == "keep me\n"


def test_cancelled_run_keeps_finished_records_and_says_so(tmp_path: Path) -> None:
    slow = Schedule(ttft_s=0.01, gap_s=0.05, pattern=(1,))

    async def go() -> None:
        with serve_in_thread(slow) as (a, _):
            task = asyncio.create_task(run_bench(plan(tmp_path, {"baseline": a}, n=20, warmup=0)))
            await asyncio.sleep(2.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    recs = read_records(tmp_path / "r" / "requests.jsonl")
    assert 0 < len(recs) < 20 and all(r.ok for r in recs)
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["interrupted"] is True and run["finished_at"]


def test_ramp_spreads_the_first_wave(tmp_path: Path) -> None:
    slow = Schedule(ttft_s=0.01, gap_s=0.05, pattern=(1,))
    with serve_in_thread(slow) as (a, la):
        p = plan(tmp_path, {"baseline": a}, n=4, warmup=0, levels=[Level.closed(4)])
        p.ramp_s = 0.6
        asyncio.run(run_bench(p))
        arrivals = sorted(r["arrival"] for r in la.requests)
    gaps = [b - x for x, b in zip(arrivals, arrivals[1:], strict=False)]
    assert all(g == pytest.approx(0.15, abs=0.06) for g in gaps), gaps


def test_without_ramp_the_first_wave_starts_together(tmp_path: Path) -> None:
    slow = Schedule(ttft_s=0.01, gap_s=0.05, pattern=(1,))
    with serve_in_thread(slow) as (a, la):
        p = plan(tmp_path, {"baseline": a}, n=4, warmup=0, levels=[Level.closed(4)])
        p.ramp_s = 0.0  # bench.ramp_s=0: all at once, as the published experiment
        asyncio.run(run_bench(p))
        arrivals = sorted(r["arrival"] for r in la.requests)
    assert arrivals[-1] - arrivals[0] < 0.05
