"""Resumability: an interrupted sweep re-runs only unfinished cells; settings changes are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError, Interrupted
from spectrn.run.records import read_records
from spectrn.sweep.orchestrate import Sweep, SweepOptions

from .conftest import FakeRunner, load

DRAFTS = ["qwen3-0.6b", "qwen3-1.7b"]


def make(cfg: SpectrnConfig, root: Path, console: Console, windows: list[int], *, resume: bool = False) -> Sweep:
    return Sweep(cfg, "s1", root, SweepOptions(drafts=DRAFTS, windows=windows, quiet=True), console, resume=resume)


def test_interrupted_sweep_resumes_only_unfinished_cells(
    sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: Console
) -> None:
    first = FakeRunner(fail_on=3)
    with pytest.raises(Interrupted) as stopped:
        make(sweep_cfg, tmp_path, quiet_console, [5, 7]).run(lambda: first)
    assert "2 finished cell(s) are kept" in str(stopped.value) and "--resume --sweep-id s1" in str(stopped.value)
    assert first.calls == ["qwen3-0.6b-k5@c4", "qwen3-0.6b-k7@c4", "qwen3-1.7b-k5@c4"]
    manifest = load(tmp_path / "s1" / "sweep.json")
    assert sorted(manifest["cells"]) == ["qwen3-0.6b-k5@c4", "qwen3-0.6b-k7@c4"]
    partial = tmp_path / "s1" / "cells" / "qwen3-1.7b-k5" / "c4" / "requests.jsonl"
    assert partial.exists()  # the interrupted cell left half a run behind

    # Without --resume an existing sweep is refused rather than mixed into.
    with pytest.raises(ConfigError, match="--resume"):
        make(sweep_cfg, tmp_path, quiet_console, [5, 7])

    done_summary = tmp_path / "s1" / "cells" / "qwen3-0.6b-k5" / "c4" / "summary.json"
    stamp = done_summary.stat().st_mtime_ns
    second = FakeRunner()
    result = make(sweep_cfg, tmp_path, quiet_console, [5, 7], resume=True).run(lambda: second)
    assert second.calls == ["qwen3-1.7b-k5@c4", "qwen3-1.7b-k7@c4"]
    assert result.ran == second.calls
    assert sorted(result.skipped) == ["qwen3-0.6b-k5@c4", "qwen3-0.6b-k7@c4"]
    assert len(load(tmp_path / "s1" / "sweep.json")["cells"]) == 4
    # The re-run cell started afresh: exactly one full run's records, none of the interrupted attempt's.
    assert len(read_records(partial)) == 2 * 12
    # Finished cells were not touched: their summaries are still the first run's.
    assert done_summary.stat().st_mtime_ns == stamp
    a = result.analysis
    assert {r.scope for r in a.recommendations} == {"structured", "open", "mix"}
    structured = next(r for r in a.recommendations if r.scope == "structured")
    assert structured.best is not None and (structured.best.draft, structured.best.window) == ("qwen3-1.7b", 7)
    assert a.equivalence.match_rate == 1.0

    # A third run of the finished sweep runs nothing and does not even start the runtime.
    third = FakeRunner()
    result3 = make(sweep_cfg, tmp_path, quiet_console, [5, 7], resume=True).run(lambda: third)
    assert third.calls == [] and third.entered == 0 and len(result3.skipped) == 4

    # Extending the grid on resume runs only the new cells.
    fourth = FakeRunner()
    make(sweep_cfg, tmp_path, quiet_console, [5, 7, 10], resume=True).run(lambda: fourth)
    assert fourth.calls == ["qwen3-0.6b-k10@c4", "qwen3-1.7b-k10@c4"]


def test_resume_with_different_settings_is_refused(
    sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: Console
) -> None:
    make(sweep_cfg, tmp_path, quiet_console, [7]).run(lambda: FakeRunner())
    other = build_config({"runtime": "sim", "bench": {"requests": 99, "prompts": "all"}}, environ={})
    with pytest.raises(ConfigError, match="different settings"):
        make(other, tmp_path, quiet_console, [7], resume=True)
    # the grid's own axes may change: other concurrency levels are new cells, not a conflict
    more = build_config({"runtime": "sim", "bench": {"requests": 12, "max_tokens": 21, "concurrency": [1, 4],
                                                      "prompts": "all"}}, environ={})  # fmt: skip
    runner = FakeRunner()
    make(more, tmp_path, quiet_console, [7], resume=True).run(lambda: runner)
    assert runner.calls == ["qwen3-0.6b-k7@c1", "qwen3-1.7b-k7@c1"]


def test_invalid_grid_fails_before_anything_runs(
    sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: Console
) -> None:
    with pytest.raises(ConfigError, match="num_speculative_tokens"):
        make(sweep_cfg, tmp_path, quiet_console, [7, 40])
    with pytest.raises(ConfigError, match="draft"):
        Sweep(sweep_cfg, "s2", tmp_path, SweepOptions(drafts=["qwen3-32b"], windows=[7]), quiet_console)
    assert not (tmp_path / "s2" / "sweep.json").exists()
    with pytest.raises(ConfigError, match="safe folder name"):
        Sweep(sweep_cfg, "../x", tmp_path, SweepOptions(drafts=DRAFTS, windows=[7]), quiet_console)


def test_a_second_process_cannot_run_the_same_sweep(
    sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: Console
) -> None:
    import fcntl
    import os

    sw = make(sweep_cfg, tmp_path, quiet_console, [7])
    fd = os.open(sw.sweep_dir, os.O_RDONLY)  # stands in for another spectrn process holding the sweep
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        runner = FakeRunner()
        with pytest.raises(ConfigError, match="another process"):
            sw.run(lambda: runner)
        assert runner.calls == []
    finally:
        os.close(fd)
    assert sw.run(lambda: FakeRunner()).ran  # free again once the other process is gone
