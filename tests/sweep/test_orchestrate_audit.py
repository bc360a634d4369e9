"""What a sweep tells its user while it runs: the time estimate and an output divergence, word for word, and
the manifest entry of a diverging cell (``spectrn.sweep.orchestrate``; the fake runner of conftest)."""

from __future__ import annotations

from pathlib import Path

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.events import Event
from spectrn.sweep.orchestrate import Sweep, SweepOptions

from .conftest import FakeRunner, load


def test_the_estimate_and_a_divergence_are_announced_and_recorded(sweep_cfg: SpectrnConfig, tmp_path: Path) -> None:
    events: list[Event] = []
    opts = SweepOptions(drafts=["qwen3-1.7b"], windows=[5, 7], quiet=True)
    Sweep(sweep_cfg, "div", tmp_path, opts, events.append).run(lambda: FakeRunner(diverge={"qwen3-1.7b-k7@c4"}))
    said = [(e.kind, e.text) for e in events if e.kind in ("heading", "alert")]
    # per cell: 12 requests + 2 warm-up = 14 over min(4, max_num_seqs 4) streams = 4 rounds x 21 tokens x the
    # probed 10 ms = 0.84 s, + 4 s overhead = 4.84 s; two cells 9.68 s, shown as 10s
    assert said == [
        ("heading", "sweep: 2 cell(s) on the fake runtime, estimated 10s (probed baseline 10.0 ms/token)"),
        ("alert", "    OUTPUT DIVERGENCE in qwen3-1.7b-k7@c4: 1 of 12 greedy outputs differ"),
    ]
    cells = load(tmp_path / "div" / "sweep.json")["cells"]
    k7 = cells["qwen3-1.7b-k7@c4"]
    assert (k7["draft"], k7["window"], k7["level"], k7["run_dir"]) == ("qwen3-1.7b", 7, "c4", "cells/qwen3-1.7b-k7/c4")
    assert k7["equivalence"] == {"compared": 12, "matched": 11, "match_rate": 11 / 12}
    assert cells["qwen3-1.7b-k5@c4"]["equivalence"] == {"compared": 12, "matched": 12, "match_rate": 1.0}


class Unprobed(FakeRunner):
    """A runtime that cannot probe the baseline's TPOT."""

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return None


def test_without_a_probe_the_estimate_assumes_50_ms_per_token_in_simulated_time(tmp_path: Path) -> None:
    cfg = build_config({"runtime": "sim", "sim": {"time_scale": 3.0}, "bench": {"requests": 12, "max_tokens": 21,
                        "concurrency": [4], "prompts": "all"}}, environ={})  # fmt: skip
    events: list[Event] = []
    opts = SweepOptions(drafts=["qwen3-1.7b"], windows=[7], quiet=True)
    Sweep(cfg, "unprobed", tmp_path, opts, events.append).run(lambda: Unprobed())
    # 50 ms x time scale 3 = 150 ms per token: 4 rounds x 21 tokens x 0.15 s = 12.6 s, + 4 s = 16.6 s
    (heading,) = [e.text for e in events if e.kind == "heading"]
    assert heading == "sweep: 1 cell(s) on the fake runtime, estimated 17s (assumed 50 ms/token (no probe possible))"


def test_predict_mode_measures_the_largest_window_first_then_confirms_one(
    sweep_cfg: SpectrnConfig, tmp_path: Path
) -> None:
    events: list[Event] = []
    runner = FakeRunner()
    opts = SweepOptions(drafts=["qwen3-1.7b"], windows=[5, 9, 7], quiet=True, predict=True)
    result = Sweep(sweep_cfg, "pred", tmp_path, opts, events.append).run(lambda: runner)
    assert runner.calls[0] == "qwen3-1.7b-k9@c4"  # the largest window holds every shorter window's acceptance
    assert len(runner.calls) == 2 and runner.calls[1] in {"qwen3-1.7b-k5@c4", "qwen3-1.7b-k7@c4", "qwen3-1.7b-k9@c4"}
    assert result.ran == runner.calls
    infos = [e.text for e in events if e.kind == "info"]
    assert (
        "predict: window 9 for 1 draft(s), then one confirmation run of the predicted optimum (instead of 3 grid cells)"
    ) in infos
