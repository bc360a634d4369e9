"""A step of the system clock in the middle of ``spectrn bench``, through the real CLI and real HTTP.

The system clock (``time.time``) jumps back one hour once the baseline server has served three responses; the
run's durations come from the monotonic clock, so its wall time and throughput stay what they were, and the
step is reported as a ``wall_clock_step`` finding.
"""

from __future__ import annotations

import time

from doubles.relhelp import bench_argv, run_cli, summary

STEP_S = -3600.0


def test_a_wall_clock_step_mid_run_leaves_the_figures_and_is_reported(hostile, capsys, tmp_path, monkeypatch) -> None:
    base, spec = hostile("token_ids"), hostile("token_ids")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + (STEP_S if base.served >= 3 else 0.0))
    argv = bench_argv({"baseline": base.url, "speculative": spec.url}, tmp_path / "results", "clk",
                      "--requests", "12", "--max-tokens", "12", "--concurrency", "1", "--prompts", "all")  # fmt: skip
    t0 = time.perf_counter()
    code, _, err = run_cli(argv, capsys)
    elapsed = time.perf_counter() - t0
    assert code == 0 and "Traceback" not in err, err
    assert base.served > 3  # the step happened during the measured requests, not after them
    s = summary(tmp_path / "results" / "clk")
    for v in s.levels[0].variants.values():
        assert 0 < v.duration_s < elapsed  # not an hour: the span is measured on the monotonic clock
    (step,) = [f for f in s.findings if f.code == "wall_clock_step"]
    assert step.severity == "warning" and "wall clock stepped by -3600." in step.message
