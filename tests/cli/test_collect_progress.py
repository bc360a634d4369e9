"""The in-cluster bench streams the load pod's log: the load generator's progress lines come back as progress
(a bar with the time left on a terminal), every other line as a line of data."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kube"))
from doubles.kube_fake import FakeKube  # noqa: E402
from doubles.kube_runfiles import shard_files  # noqa: E402
from doubles.kubehelp import make_cfg, run_deploy  # noqa: E402
from spectrn.bench.incluster import run_incluster_bench  # noqa: E402
from spectrn.events import Event, progress_line  # noqa: E402

RUN = "r20260101-1200"


def test_pod_progress_lines_become_progress_events(tmp_path: Path) -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = FakeKube()
    run_deploy(fake, cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    fake.job_done_line = progress_line("baseline", 24, 24, "requests", 30.0, 0.0, errors=2)
    events: list[Event] = []
    run_incluster_bench(cfg, RUN, "spectrn", events.append, fake, out_root=tmp_path, clock=fake.clock,
                        sleep=fake.sleep)  # fmt: skip
    (bar,) = [e for e in events if e.kind == "progress"]
    assert bar.text == "baseline"
    assert {k: bar.fields[k] for k in ("completed", "total", "unit", "errors")} == {
        "completed": 24, "total": 24, "unit": "requests", "errors": 2}  # fmt: skip
    said = [e.text for e in events if e.kind == "info"]
    assert said[0].startswith(f"started Job spectrn/spectrn-loadgen-{RUN}")
    assert "progress: 1 requests done" in said  # other log lines pass through as data
    assert said[-1] == f"collected 1 pod(s) into {tmp_path / RUN}"


def test_collect_after_the_cli_went_away_shows_the_pods_progress(tmp_path: Path) -> None:
    from spectrn.bench.incluster import collect, start_load_job

    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    fake = FakeKube()
    run_deploy(fake, cfg)
    fake.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    fake.job_done_line = progress_line("speculative", 24, 24, "requests", 30.0, 0.0)
    start_load_job(fake, cfg, RUN, "spectrn")  # the Job runs; the CLI that started it is gone
    events: list[Event] = []
    collected = collect(fake, cfg.namespace, RUN, out_root=tmp_path, on_event=events.append, clock=fake.clock,
                        sleep=fake.sleep)  # fmt: skip
    assert collected.run_dir == tmp_path / RUN
    assert [(e.text, e.fields["completed"]) for e in events if e.kind == "progress"] == [("speculative", 24)]
