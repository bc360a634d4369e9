"""In-cluster bench: the load Job, progress, retrieval, shard merge, cleanup, and `collect` after a crash.

The collected folder is analyzed by the caller (``spectrn bench`` / ``spectrn collect``, tested through the CLI
in test_kube_cli.py); tests here that look at a summary analyze the collected folder themselves."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from contract import assert_valid_run_folder
from doubles.kube_fake import FakeKube
from doubles.kube_runfiles import shard_files
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.bench.incluster import _safe_extract, collect, run_incluster_bench
from spectrn.errors import BenchError, Interrupted
from spectrn.events import Event
from spectrn.finish import finish
from spectrn.run.records import read_records

RUN = "r20260101-1200"


class Lines:
    """A console stand-in that keeps what was printed."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, event: Event) -> None:
        self.lines.append(event.text)


def deployed(cfg) -> FakeKube:
    fake = FakeKube()
    run_deploy(fake, cfg)
    return fake


def bench(fake, cfg, tmp_path, console=None, **kw):
    return run_incluster_bench(
        cfg, RUN, "spectrn", console, fake, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep, **kw
    )


def test_single_pod_bench_collects_and_cleans_up(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    console = Lines()
    run_dir = bench(fake, cfg, tmp_path, console)
    assert run_dir == tmp_path / RUN
    assert len(read_records(run_dir / "requests.jsonl")) == 24
    assert not (run_dir / "summary.json").exists()  # collected, not analyzed: the caller finishes it once
    summary = finish(run_dir, report=False).summary
    assert_valid_run_folder(run_dir)  # an in-cluster run's files follow the published schemas
    assert summary.levels[0].speedup is not None and summary.levels[0].speedup.tpot_p50 is not None
    assert (summary.levels[0].speedup.tpot_p50.value or 0) > 1  # the collected records are a complete run
    # progress was streamed from the pod
    assert any("progress:" in line for line in console.lines)
    # the pod was released, then the Job and its ConfigMap deleted
    execs = [w for op, w in fake.calls if op == "exec"]
    assert any(w.endswith(f"touch /results/{RUN}/.collected") for w in execs)
    assert fake.find("Job", f"spectrn-loadgen-{RUN}", "spectrn") is None
    assert fake.find("ConfigMap", f"spectrn-config-{RUN}", "spectrn") is None
    assert fake.find("ConfigMap", "spectrn-prompts", "spectrn") is not None  # deploy's objects stay


def test_sharded_bench_merges_every_shard(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", bench={"loadgen_pods": 3})
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, i, 3)
    run_dir = bench(fake, cfg, tmp_path, Lines())
    recs = read_records(run_dir / "requests.jsonl")
    assert len(recs) == 24 and {r.shard for r in recs} == {0, 1, 2}
    assert sorted({r.index for r in recs}) == list(range(12))
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["shards"] == 3 and meta["shard"] == 0  # as a merged run.json always read: the default shard
    assert (meta["started_at"], meta["finished_at"]) == (100.0, 202.0)
    assert meta["notes"] == ["shard 0: note from 0", "shard 1: note from 1", "shard 2: note from 2"]
    # acceptance spans the run: earliest "before" (shard 0: 0 drafts) to latest "after" (shard 2: 250)
    acc = json.loads((run_dir / "acceptance.json").read_text())["speculative@c4"]
    assert acc["drafts"] == 250 and acc["accepted_tokens"] == 1000
    assert acc["rate"] == pytest.approx(1000 / 1750)
    summary = finish(run_dir, report=False).summary
    acc_s = summary.levels[0].variants["speculative"].acceptance
    assert acc_s is not None and acc_s.rate == pytest.approx(1000 / 1750)


def test_results_survive_a_cli_crash_and_collect_fetches_them(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", bench={"loadgen_pods": 2})
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, i, 2)
    # the CLI dies while copying (connection torn down for good)
    fake.fail_next("exec", status=0, times=1000)
    with pytest.raises(BenchError) as err:
        bench(fake, cfg, tmp_path)
    assert f"spectrn collect {RUN}" in err.value.hint
    assert fake.find("Job", f"spectrn-loadgen-{RUN}", "spectrn") is not None  # kept, results still in the pods
    fake._failures.clear()
    collected = collect(fake, "spectrn", RUN, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep)
    assert collected.engine == "spectrn" and collected.run_dir == tmp_path / RUN
    assert len(read_records(collected.run_dir / "requests.jsonl")) == 24
    assert fake.find("Job", f"spectrn-loadgen-{RUN}", "spectrn") is None


def test_ctrl_c_keeps_the_job_for_collect(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)  # still running

    class Stop(Lines):
        def __call__(self, event):
            if "progress: 2" in event.text:
                raise KeyboardInterrupt

    with pytest.raises(Interrupted) as err:
        bench(fake, cfg, tmp_path, Stop())
    assert f"spectrn collect {RUN}" in (err.value.hint or "")
    assert fake.find("Job", f"spectrn-loadgen-{RUN}", "spectrn") is not None


def test_pod_that_exits_before_collection_reports_lost_results(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)
    fake.job_finishes_without_collect = True
    with pytest.raises(BenchError) as err:
        bench(fake, cfg, tmp_path)
    assert "ended (Succeeded) before its results were collected: results are lost" in str(err.value)


def test_unfinished_run_times_out_with_a_collect_hint(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = deployed(cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)
    with pytest.raises(BenchError) as err:
        bench(fake, cfg, tmp_path, timeout_s=60)
    assert "did not finish within 60 s (0/1 pod(s) done)" in str(err.value)
    assert f"spectrn collect {RUN}" in err.value.hint


def _llmperf_rows(e2e: float, n: int = 6) -> bytes:
    rows = [
        {
            "error_code": None,
            "error_msg": "",
            "ttft_s": 0.05,
            "end_to_end_latency_s": e2e + 0.001 * i,
            "inter_token_latency_s": e2e / 64,
            "request_output_throughput_token_per_s": 64 / e2e,
            "number_total_tokens": 128,
            "number_output_tokens": 64,
            "number_input_tokens": 64,
        }
        for i in range(n)
    ]
    return json.dumps(rows).encode()


def test_llmperf_engine_ingests_every_test_case(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = deployed(cfg)
    out = f"/results/{RUN}/llmperf"
    files = {}
    for case in ("counting-numbers-from-1", "hello-world"):
        files[f"{out}/{case}/baseline/Qwen-Qwen3-32B_64_64_individual_responses.json"] = _llmperf_rows(3.0)
        files[f"{out}/{case}/speculative/Qwen-Qwen3-32B_64_64_individual_responses.json"] = _llmperf_rows(1.2)
    fake.job_files = lambda pod, i: files
    fake.job_done_line = f"llmperf finished; results in {out}"
    run_dir = run_incluster_bench(
        cfg, RUN, "llmperf", Lines(), fake, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep
    )
    s = finish(run_dir).summary  # an llmperf run finishes (and would publish) like any other
    assert s.provenance.engine == "llmperf"
    assert set(s.levels[0].by_prompt_class) == {"counting-numbers-from-1", "hello-world"}
    assert set(s.levels[0].by_prompt_class["hello-world"].variants) == {"baseline", "speculative"}
    assert fake.find("Job", f"spectrn-llmperf-{RUN}", "spectrn") is None


def test_bench_needs_deployed_services(tmp_path):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    with pytest.raises(BenchError, match="not deployed") as err:
        bench(FakeKube(), cfg, tmp_path)
    assert "spectrn deploy" in err.value.hint


def test_collect_unknown_run(tmp_path):
    with pytest.raises(BenchError, match="no load Job for run nope"):
        collect(FakeKube(), "spectrn", "nope", out_root=tmp_path)


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            if kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_refuses_paths_that_climb_out(tmp_path):
    with pytest.raises(BenchError, match="unsafe path"):
        _safe_extract(_tar([("../evil", b"x", "file")]), tmp_path / "d")
    with pytest.raises(BenchError, match="unsafe path"):
        _safe_extract(_tar([("/abs", b"x", "file")]), tmp_path / "d")


def test_extract_skips_links(tmp_path):
    names = _safe_extract(_tar([("./link", b"", "sym"), ("./a/b.txt", b"hi", "file")]), tmp_path / "d")
    assert names == ["a/b.txt"] and not (tmp_path / "d" / "link").exists()
