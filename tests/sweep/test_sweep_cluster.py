"""The cluster path on the fake cluster: baseline deployed once, the speculative service re-deployed per
(draft, window), one in-cluster load Job per cell, results collected into the sweep's cell folders."""

from __future__ import annotations

from pathlib import Path

from doubles.kube_fake import FakeKube
from spectrn.configuration.sources import build_config
from spectrn.events import Event
from spectrn.sweep.grid import Cell
from spectrn.sweep.orchestrate import Sweep, SweepOptions
from spectrn.sweep.runners import ClusterRunner

from .conftest import write_run


def test_cluster_sweep_redeploys_speculative_per_configuration(tmp_path: Path) -> None:
    cfg = build_config(
        {"runtime": "sim", "resources_mode": "device-plugin", "s3": {"bucket": "my-models"},
         "bench": {"requests": 12, "max_tokens": 21, "concurrency": [1, 4], "prompts": "all"}},
        environ={},
    )  # fmt: skip
    fake = FakeKube()
    events: list[Event] = []
    runner = ClusterRunner(fake, cfg, "Cluster_Sweep", events.append, clock=fake.clock, sleep=fake.sleep, poll_s=30)
    cells = {
        runner.run_id(Cell(d, w, lv)): Cell(d, w, lv) for d in ("qwen3-1.7b",) for w in (5, 7) for lv in ("c1", "c4")
    }
    assert all(len(r) <= 40 and r == r.lower() for r in cells)
    seen: list[tuple[str, list[str]]] = []

    def job_files(pod: str, index: int) -> dict[str, bytes]:
        run_id = pod.removeprefix("spectrn-loadgen-").rsplit("-fk", 1)[0]
        cell = cells[run_id]
        dep = fake.find("Deployment", cfg.speculative_name, cfg.namespace)
        assert dep is not None
        seen.append((run_id, dep["spec"]["template"]["spec"]["containers"][0]["args"]))
        folder = write_run(tmp_path / "pod" / run_id, cfg, cell)
        return {f"/results/{run_id}/{p.name}": p.read_bytes() for p in folder.iterdir() if p.is_file()}

    fake.job_files = job_files
    sw = Sweep(
        cfg, "cl", tmp_path / "results", SweepOptions(drafts=["qwen3-1.7b"], windows=[5, 7], quiet=True), events.append
    )
    result = sw.run(lambda: runner)
    assert len(result.ran) == 4
    said = [e.text for e in events if e.kind != "progress"]
    assert "deploying the shared baseline (reused when already up to date)" in said
    assert said.count("deploying speculative service: qwen3-1.7b window 5") == 1  # once per configuration
    deploys = [e for e in events if e.kind == "progress" and e.fields["unit"] == "services"]
    assert {e.text for e in deploys} == {"deploy baseline", "deploy speculative"}  # readiness as progress
    assert deploys[-1].fields["completed"] == deploys[-1].fields["total"]
    # every cell ran against a speculative Deployment configured with that cell's window
    for run_id, args in seen:
        w = str(cells[run_id].window)
        assert args[args.index("--window") + 1] == w
    deployments = [w for op, w in fake.calls if op == "apply" and "Deployment" in w]
    assert sum(cfg.baseline_name in w for w in deployments) == 1  # the shared baseline, applied once
    assert sum(cfg.speculative_name in w for w in deployments) == 2  # once per (draft, window), not per level
    # results landed in the sweep's cell folders and were analyzed
    run_dir = tmp_path / "results" / "cl" / "cells" / "qwen3-1.7b-k7" / runner.run_id(Cell("qwen3-1.7b", 7, "c4"))
    assert (run_dir / "summary.json").exists()
    assert result.analysis.levels == ["c1", "c4"]
    assert {c.crossover for c in result.analysis.crossovers} >= {None}
