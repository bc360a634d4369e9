"""``spectrn capacity --local --twin``: the twin's predicted capacity per window beside the measured one."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

SLO_S = 0.060


@pytest.mark.slow
def test_twin_capacity_is_shown_beside_the_measurement(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path
) -> None:
    common = ("--local", "--time-scale", "0.05", "--max-tokens", "32", "--set", "bench.warmup=0")
    code, _, err = cli("bench", *common, "--concurrency", "2,8", "--requests", "24", "--run-id", "cal",
                       "--out-dir", tmp_path / "runs", "--no-report", "-o", "json")  # fmt: skip
    assert code == 0, err
    code, _, err = cli("twin", "calibrate", tmp_path / "runs" / "cal", "--out-file", tmp_path / "twin.yaml")
    assert code == 0, err
    code, out, err = cli("capacity", *common, "--slo", f"p50:tpot<={SLO_S * 1e3:g}ms", "--max", "4", "--twin",
                         tmp_path / "twin.yaml", "--id", "cap", "--out-dir", tmp_path / "out")  # fmt: skip
    assert code == 0, err
    doc = json.loads((tmp_path / "out" / "cap" / "capacity.json").read_text())
    twin = doc["twin"]
    window = doc["speculative_window"]
    assert set(twin["windows"]) == {"baseline", f"k{window}"}
    for key, points in twin["points"].items():
        # each point judged on its own median TPOT (the SLO is p50), and the capacity is the highest pass below
        # the lowest fail, as the search defines it
        assert points and all(p["passed"] == (p["tpot_p50_s"] <= SLO_S) for p in points)
        fails = [p["concurrency"] for p in points if not p["passed"]]
        passes = [p["concurrency"] for p in points if p["passed"] and (not fails or p["concurrency"] < min(fails))]
        assert twin["windows"][key] == (max(passes) if passes else None)
    measured = doc["variants"]["baseline"]["capacity"]
    assert f"baseline: {twin['windows']['baseline']} (measured {measured:g})" in out
