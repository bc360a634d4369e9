"""The run as a whole under pressure: open-loop memory, the default load shape, what run.json records,
and failures of this client (disk, file descriptors, an error mid-run) that must not look like a clean run."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from doubles.reference_server import Schedule, serve_in_thread
from spectrn.errors import BenchError
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.plan import RunPlan
from spectrn.loadgen.prompts import build_schedule, load_prompt_set
from spectrn.loadgen.runner import Level, run_bench
from spectrn.loadgen.schedulers import AUTO_RAMP_STEP_S, closed_loop_ramp
from spectrn.loadgen.sink import RecordSink
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord, read_records

FAST = Schedule(ttft_s=0.0, gap_s=0.0, pattern=(1,))


def plan(tmp: Path, eps: dict[str, str], *, n: int, warmup: int = 0, levels: list[Level], run_id: str = "r") -> RunPlan:
    return RunPlan(
        run_id=run_id,
        out_dir=tmp / run_id,
        endpoints=eps,
        schedule=build_schedule(load_prompt_set("all"), requests=n, warmup=warmup, seed=1),
        params=RequestParams(model="ref-model", api="completions", max_tokens=2, keep_output=False),
        levels=levels,
    )


def _open_loop_footprint(tmp: Path, base: str, scheduled: int, stop_after: int = 300) -> tuple[int, int]:
    """(most tasks alive at once, traced memory peak) while the first ``stop_after`` of ``scheduled``
    open-loop requests run (2,000 req/s, at most 64 in flight); then the run is cancelled."""
    p = plan(
        tmp, {"baseline": base}, n=scheduled, levels=[Level.open(2000.0, max_in_flight=64)], run_id=f"o{scheduled}"
    )

    async def go() -> tuple[int, int]:
        done = 0
        most = 0

        def on_record(_rec: RequestRecord) -> None:
            nonlocal done
            done += 1
            if done == stop_after:
                task.cancel()

        tracemalloc.start()
        try:
            task = asyncio.create_task(run_bench(p, on_record=on_record))
            while not task.done():
                most = max(most, len(asyncio.all_tasks()))
                await asyncio.sleep(0.002)
            with pytest.raises(asyncio.CancelledError):
                await task
            return most, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    return asyncio.run(go())


def test_open_loop_memory_does_not_grow_with_the_number_of_scheduled_requests(tmp_path: Path) -> None:
    """Before: every scheduled request was a task from the start (100,000 tasks, hundreds of MB). Now only
    requests in flight are tasks: the footprint for 100,000 scheduled requests equals that for 10,000."""
    with serve_in_thread(FAST) as (base, _):
        tasks_10k, peak_10k = _open_loop_footprint(tmp_path, base, 10_000)
        tasks_100k, peak_100k = _open_loop_footprint(tmp_path, base, 100_000)
    # at most 64 requests in flight, plus 64 connection pre-warming GETs before the level and a few others
    assert max(tasks_10k, tasks_100k) <= 2 * 64 + 16, (tasks_10k, tasks_100k)
    # the schedule's own index lists grow by 8 bytes a request (0.7 MB here); a task per request would be
    # about 1.5 KB a request (130 MB)
    assert peak_100k - peak_10k < 8 << 20, (peak_10k, peak_100k)


def test_run_json_records_the_plan_the_load_shape_and_the_token_source(tmp_path: Path) -> None:
    with serve_in_thread(FAST) as (a, _), serve_in_thread(FAST) as (b, _):
        p = plan(tmp_path, {"baseline": a, "speculative": b}, n=6, warmup=1, levels=[Level.closed(4), Level.open(50)])
        asyncio.run(run_bench(p))
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["planned"] == {"baseline": {"c4": 6, "r50": 6}, "speculative": {"c4": 6, "r50": 6}}
    assert run["planned_warmup"] == {"baseline": 1, "speculative": 1}
    assert run["interrupted"] is False and run["stop_reason"] is None
    closed, open_ = run["load_shape"]["c4"], run["load_shape"]["r50"]
    assert closed["kind"] == "closed-loop" and closed["ramp"].startswith("auto")
    assert closed["ramp_s"] == pytest.approx(3 * AUTO_RAMP_STEP_S, abs=1e-9) or "warm-up" in closed["ramp"]
    assert {k: v for k, v in open_.items() if v is not None} == {  # the closed loop's fields are null
        "kind": "open-loop",
        "arrivals": "poisson",
        "rate_per_s": 50.0,
        "rate_per_s_this_shard": 50.0,
        "max_in_flight": 1024,
        "max_in_flight_this_shard": 1024,
        "max_in_flight_set": False,
        "ttft_from": "send",
        "seed": 0,
    }
    assert run["token_sources"] == {"baseline": {"token_ids": 13}, "speculative": {"token_ids": 13}}
    assert any("baseline: tokens per chunk counted from token_ids 13" in n for n in run["notes"])


def test_the_automatic_ramp_spreads_the_first_wave_and_an_explicit_one_wins(tmp_path: Path) -> None:
    slow = Schedule(ttft_s=0.01, gap_s=0.05, pattern=(1,))
    with serve_in_thread(slow) as (a, _):
        asyncio.run(run_bench(plan(tmp_path, {"baseline": a}, n=8, levels=[Level.closed(8)])))
    sent = sorted(r.sent_at for r in read_records(tmp_path / "r" / "requests.jsonl"))
    # 8 streams, one every 10 ms: the last leaves 70 ms after the first started waiting (sleeps are never
    # short); the first may itself leave a little late on a busy machine
    assert sent[-1] - sent[0] >= 0.05
    p = plan(tmp_path, {"baseline": a}, n=8, levels=[Level.closed(8)])
    assert closed_loop_ramp(p, Level.closed(256), warm_e2e=None) == pytest.approx((2.55, "auto: 10 ms per stream"))
    assert closed_loop_ramp(p, Level.closed(256), warm_e2e=1.0)[0] == pytest.approx(0.5)  # half a request
    assert closed_loop_ramp(p, Level.closed(4096), warm_e2e=None)[0] == 10.0
    assert closed_loop_ramp(p, Level.closed(1), warm_e2e=None)[0] == 0.0
    p.ramp_s = 0.0
    assert closed_loop_ramp(p, Level.closed(256), warm_e2e=None) == (0.0, "bench.ramp_s")


def test_an_error_mid_run_marks_the_run_interrupted_with_the_reason(tmp_path: Path) -> None:
    def explode(rec: RequestRecord) -> None:
        if rec.index == 3:
            raise RuntimeError("boom in a callback")

    with serve_in_thread(FAST) as (a, _):
        with pytest.raises(RuntimeError, match="boom"):
            asyncio.run(run_bench(plan(tmp_path, {"baseline": a}, n=20, levels=[Level.closed(2)]), on_record=explode))
    run = json.loads((tmp_path / "r" / "run.json").read_text())
    assert run["interrupted"] is True and run["finished_at"]
    assert run["stop_reason"] == "an error: RuntimeError: boom in a callback"
    assert any("interrupted" in n for n in run["notes"])
    assert 0 < len(read_records(tmp_path / "r" / "requests.jsonl")) < 20


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_is_a_bench_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "requests.jsonl").symlink_to("/dev/full")
    sink = RecordSink(RunFolder(tmp_path), None)
    rec = RequestRecord(variant="v", index=0, prompt_id="p", prompt_class="c", sent_at=1.0)
    with pytest.raises(BenchError, match=r"cannot write .*requests.jsonl: No space left on device") as e:
        sink.add(rec)
    assert e.value.hint and "--out-dir" in e.value.hint
    sink.close()  # the first failure was reported; closing does not raise a second one


def test_a_read_only_results_folder_is_a_bench_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BenchError, match=r"cannot write .*requests.jsonl: Not a directory"):
        RecordSink(RunFolder(tmp_path / "file"), None)


def test_out_of_file_descriptors_mid_request_is_a_bench_error_not_a_connect_record(tmp_path: Path) -> None:
    """A real EMFILE: a child process uses up its open-file limit, then sends a request."""
    script = textwrap.dedent(
        """
        import asyncio, os, resource, aiohttp
        from spectrn.errors import BenchError
        from spectrn.loadgen.client import RequestParams, run_request
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
        async def main():
            async with aiohttp.ClientSession() as s:
                held = []
                try:
                    while True:
                        held.append(os.open(os.devnull, os.O_RDONLY))
                except OSError:
                    pass
                try:
                    rec = await run_request(s, "http://127.0.0.1:9/v1/completions", RequestParams(model="m"), "x",
                                            variant="v", index=0, prompt_id="p", prompt_class="c", level="c1",
                                            warmup=False)
                    print("RECORD", rec.error)
                except BenchError as e:
                    print("BENCHERROR", e)
        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("BENCHERROR out of file descriptors while connecting to http://127.0.0.1:9/"), (
        out.stdout
    )
    assert "ulimit -n" in out.stdout and "Traceback" not in out.stderr
