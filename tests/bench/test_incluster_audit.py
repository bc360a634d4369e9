"""What ``collect`` copies, merges and reports, pinned cell by cell (audit, issue 29).

The shard folders are written by hand here with distinct values per shard (the earliest start, the latest end
and the first shard are three different shards), so a merge that takes the wrong shard, the wrong end of a
range or the wrong key cannot pass. Expected values are written out from the module's rules: earliest
``before`` scrape and latest ``after`` scrape, acceptance from their counter deltas (rate = accepted / draft
tokens, mean accepted length = 1 + accepted / drafts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doubles.kube_fake import FakeKube
from doubles.kube_runfiles import SPEC_PROM, record, shard_files
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.bench.incluster import INDEX_ANNOTATION, _expected_pods, _index, merge_shards, run_incluster_bench
from spectrn.errors import BenchError
from spectrn.events import Event
from spectrn.run.records import RunMeta, read_records

RUN = "r20260101-1200"
# shard -> (started_at, finished_at, interrupted, notes); shard 1 starts first, shard 2 ends last
SHARDS = {
    0: (110.0, 205.0, False, ["n0"]),
    1: (100.0, 220.0, True, ["n1a", "n1b"]),
    2: (105.0, 230.0, False, ["n2"]),
}


def _prom(drafts: int, draft_tokens: int, accepted: int) -> str:
    return SPEC_PROM.format(drafts=drafts, draft_tokens=draft_tokens, accepted=accepted)


def _write_shard(folder: Path, idx: int, *, name_the_shard: bool = True) -> None:
    started, finished, interrupted, notes = SHARDS[idx]
    meta = RunMeta(
        run_id=RUN,
        spectrn_version="0.1.0",
        started_at=started,
        finished_at=finished,
        interrupted=interrupted,
        endpoints={f"v{idx}": f"http://svc-{idx}:8000"},
        notes=notes,
        shard=idx,
        shards=3,
    )
    (folder / "metrics").mkdir(parents=True)
    (folder / "run.json").write_text(meta.model_dump_json())
    recs = [record("speculative", 10 * idx + i, idx) for i in range(2)]
    exclude = None if name_the_shard else {"shard"}
    (folder / "requests.jsonl").write_text("".join(r.model_dump_json(exclude=exclude) + "\n" for r in recs))
    # every shard scraped the same server before and after its own part; the level is an open-loop rate
    base = 10 * (idx + 1)
    (folder / "metrics" / "speculative.r0.5.before.prom").write_text(_prom(base, 7 * base, 4 * base))
    (folder / "metrics" / "speculative.r0.5.after.prom").write_text(_prom(base + 100, 7 * base + 700, 4 * base + 400))


def _merged(tmp_path: Path, *, unnamed: int | None = None) -> Path:
    run_dir = tmp_path / RUN
    shards = {}
    for idx in SHARDS:
        folder = run_dir / "shards" / str(idx)
        _write_shard(folder, idx, name_the_shard=idx != unnamed)
        shards[idx] = folder
    merge_shards(run_dir, shards)
    return run_dir


def test_merged_run_json_spans_every_shard(tmp_path: Path) -> None:
    meta = json.loads((_merged(tmp_path) / "run.json").read_text())
    assert (meta["shard"], meta["shards"]) == (0, 3)
    assert (meta["started_at"], meta["finished_at"]) == (100.0, 230.0)  # earliest start (1), latest end (2)
    assert meta["interrupted"] is True  # one shard stopped early: the run did
    assert meta["endpoints"] == {"v0": "http://svc-0:8000", "v1": "http://svc-1:8000", "v2": "http://svc-2:8000"}
    assert meta["notes"] == ["shard 0: n0", "shard 1: n1a", "shard 1: n1b", "shard 2: n2"]


def test_merged_run_is_unfinished_when_any_shard_is(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN
    shards = {}
    for idx in (0, 1):
        folder = run_dir / "shards" / str(idx)
        _write_shard(folder, idx)
        shards[idx] = folder
    meta = json.loads((shards[1] / "run.json").read_text())
    (shards[1] / "run.json").write_text(json.dumps({**meta, "finished_at": None}))
    merge_shards(run_dir, shards)
    assert json.loads((run_dir / "run.json").read_text())["finished_at"] is None


def test_merged_acceptance_runs_from_the_earliest_before_to_the_latest_after(tmp_path: Path) -> None:
    run_dir = _merged(tmp_path)
    # before: shard 1 (earliest start): drafts 20, draft tokens 140, accepted 80
    # after: shard 2 (latest end): drafts 130, draft tokens 910, accepted 520
    # deltas 110, 770, 440: rate 440 / 770 = 4/7; mean accepted length 1 + 440 / 110 = 5
    acc = json.loads((run_dir / "acceptance.json").read_text())
    assert list(acc) == ["speculative@r0.5"]
    got = acc["speculative@r0.5"]
    assert (got["source"], got["drafts"], got["draft_tokens"], got["accepted_tokens"]) == (
        "counter deltas",
        110.0,
        770.0,
        440.0,
    )
    assert got["rate"] == pytest.approx(4 / 7) and got["mean_accepted_length"] == pytest.approx(5.0)
    assert got["per_position"] is None
    # the scrapes kept are exactly those two
    assert (run_dir / "metrics" / "speculative.r0.5.before.prom").read_text() == _prom(20, 140, 80)
    assert (run_dir / "metrics" / "speculative.r0.5.after.prom").read_text() == _prom(130, 910, 520)


def test_merged_records_keep_their_shard_or_take_the_folders(tmp_path: Path) -> None:
    recs = read_records(_merged(tmp_path, unnamed=2) / "requests.jsonl")
    assert [(r.index, r.shard) for r in recs] == [(0, 0), (1, 0), (10, 1), (11, 1), (20, 2), (21, 2)]


def test_shard_index_comes_from_the_annotation_or_the_label() -> None:
    assert _index({"metadata": {"annotations": {INDEX_ANNOTATION: "2"}}}) == 2
    assert _index({"metadata": {"labels": {INDEX_ANNOTATION: "3"}}}) == 3
    assert _index({"metadata": {"annotations": {INDEX_ANNOTATION: "x"}}}) == 0
    assert _index({"metadata": {}}) == 0


def test_pods_expected_are_the_jobs_completions_not_its_parallelism() -> None:
    # an Indexed Job may run fewer pods at once than it completes: every completion is a shard to collect
    assert _expected_pods({"spec": {"completions": 3, "parallelism": 2}}) == 3
    assert _expected_pods({"spec": {"parallelism": 2}}) == 2
    assert _expected_pods({"spec": {}}) == 1


def _bench(tmp_path: Path, shards: int, **kw: object) -> tuple[Path, list[Event], FakeKube]:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", bench={"loadgen_pods": shards})
    fake = FakeKube()
    run_deploy(fake, cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, i, shards)
    events: list[Event] = []
    run_dir = run_incluster_bench(
        cfg, RUN, "spectrn", events.append, fake, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep, **kw
    )
    return run_dir, events, fake


def test_each_pod_is_copied_to_the_shard_folder_of_its_index(tmp_path: Path) -> None:
    run_dir, events, _ = _bench(tmp_path, 2)
    for idx in (0, 1):
        meta = json.loads((run_dir / "shards" / str(idx) / "run.json").read_text())
        assert (meta["shard"], meta["started_at"]) == (idx, 100.0 + idx)
    info = [e.text for e in events if e.kind == "info"]
    assert info[-1] == f"collected 2 pod(s) into {run_dir}"
    # each pod's log lines are passed on once, named by shard
    assert info.count("[shard 0] progress: 1 requests done") == 1
    assert info.count("[shard 1] progress: 1 requests done") == 1


def test_the_default_timeout_covers_startup_and_every_request(tmp_path: Path) -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", bench={"requests": 7, "timeout_s": 100})
    fake = FakeKube()
    run_deploy(fake, cfg)
    fake.tick_s = 500.0  # the fake watch waits a tick per poll: few polls to reach the timeout
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)
    with pytest.raises(BenchError) as err:
        run_incluster_bench(
            cfg, RUN, "spectrn", None, fake, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep, poll_s=500
        )
    # startup budget + 100 s per request x 7 requests + 1800 s of slack
    expected = cfg.probes.startup_budget_s + 700 + 1800
    assert f"did not finish within {expected:.0f} s (0/1 pod(s) done)" in str(err.value)


@pytest.mark.parametrize("held", ["run.json", "requests.jsonl", "summary.json", "shards", "llmperf"])
def test_a_folder_that_already_holds_a_run_is_refused(tmp_path: Path, held: str) -> None:
    (tmp_path / RUN).mkdir()
    (tmp_path / RUN / held).write_text("x")
    with pytest.raises(BenchError, match=rf"already holds a run \({held}\)"):
        cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
        run_incluster_bench(cfg, RUN, "spectrn", None, FakeKube(), out_root=tmp_path)


def test_a_pods_progress_line_keeps_done_and_total_apart(tmp_path: Path) -> None:
    from spectrn.events import progress_line

    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = FakeKube()
    run_deploy(fake, cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    fake.job_done_line = progress_line("baseline", 5, 24, "requests", 30.0, 0.0, errors=1)
    events: list[Event] = []
    run_incluster_bench(cfg, RUN, "spectrn", events.append, fake, out_root=tmp_path, clock=fake.clock, sleep=fake.sleep)
    (bar,) = [e for e in events if e.kind == "progress"]
    fields = {k: bar.fields[k] for k in ("completed", "total", "unit", "errors")}
    assert (bar.text, fields) == ("baseline", {"completed": 5, "total": 24, "unit": "requests", "errors": 1})
