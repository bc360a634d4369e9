"""One source for what a run measured: the servers' own draft and window in every output, a contradiction with the
config as the first finding, and ``compare`` reading each run's configuration as run (runtime, time scale), not as
written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from spectrn.sim import SimSettings, run_in_thread

pytestmark = pytest.mark.slow

Run = Callable[..., tuple[int, str, str]]


def test_endpoint_run_shows_the_servers_draft_and_window_everywhere(cli: Run, tmp_path: Path) -> None:
    # the servers run draft qwen3-0.6b at window 5 (the vllm-neuron profile labels its per-position counters, so
    # the window is read from /metrics as on a real plugin server); the config keeps its qwen3-1.7b at window 7
    base = run_in_thread(SimSettings(time_scale=0.05, profile="vllm-neuron"))
    spec = run_in_thread(
        SimSettings(time_scale=0.05, profile="vllm-neuron", speculative=True, draft="qwen3-0.6b", window=5)
    )
    try:
        code, out, err = cli(
            "bench", "--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}",
            "--concurrency", "2", "--requests", "8", "--max-tokens", "32", "--prompts", "structured",
            "--out-dir", str(tmp_path), "--run-id", "ep", "--time-scale", "0.05",
        )  # fmt: skip
    finally:
        base.stop()
        spec.stop()
    assert code == 0, err
    run = tmp_path / "ep"
    s = json.loads((run / "summary.json").read_text())
    assert s["config_label"] == "qwen3-0.6b/k5"
    first = s["findings"][0]
    assert first["code"] == "config_contradiction", s["findings"]
    assert "the config says draft qwen3-1.7b, window 7" in first["message"]
    assert "serves draft qwen3-0.6b, window 5" in first["message"]
    terminal = " ".join((out + err).split())
    assert "(qwen3-0.6b/k5)" in terminal and "CONFIG CONTRADICTS SERVER" in terminal
    md = (run / "report" / "summary.md").read_text()
    assert "draft `qwen3-0.6b` (from the server), window 5 (from the server)" in md
    assert "CONFIG CONTRADICTS SERVER" in md
    # the servers' time scale, declared with --time-scale (no server says it): figures rescaled, and said so
    assert s["provenance"]["time_scale"] == 0.05 and s["provenance"]["rescaled"]
    assert "simulated at time scale 0.05: figures rescaled to real time" in md
    assert "simulated at time scale 0.05: figures rescaled to real time" in terminal
    # qwen3-1.7b appears only where the contradiction is told, never as the run's draft
    assert all("config says" in line for line in md.splitlines() if "qwen3-1.7b" in line)
    html = " ".join((run / "report" / "index.html").read_text().split())
    assert ">qwen3-0.6b (from the server; the config says qwen3-1.7b)</td>" in html
    assert ">5 (from the server; the config says 7)</td>" in html
    assert "CONFIG CONTRADICTS SERVER" in html
    # compare names the measured setup of each run
    code, cmp_out, err = cli("compare", str(run), str(run), "-o", "json")
    assert code == 0, err
    cmp = json.loads(cmp_out)
    assert cmp["a"]["config"] == cmp["b"]["config"] == "qwen3-0.6b/k5"


def test_compare_of_two_simulator_runs_invents_no_difference(cli: Run, tmp_path: Path) -> None:
    common = ("bench", "--local", "--requests", "4", "--concurrency", "2", "--time-scale", "0.05", "--max-tokens",
              "16", "--prompts", "structured", "--no-report", "--out-dir", str(tmp_path))  # fmt: skip
    code, _, err = cli(*common, "--run-id", "a")  # the config as written says runtime: neuron (the default)
    assert code == 0, err
    code, _, err = cli(*common, "--run-id", "b", "--set", "runtime=sim")
    assert code == 0, err
    code, out, err = cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", "json")
    assert code == 0, err
    cmp = json.loads(out)
    assert "runtime" not in cmp["config_differences"], cmp["config_differences"]
    assert "sim.time_scale" not in cmp["config_differences"], cmp["config_differences"]
    assert not cmp["warnings"], cmp["warnings"]
    # and each run says its figures were simulated at time scale 0.05, in the table and the markdown
    for side in ("a", "b"):
        assert "simulated at time scale 0.05" in cmp[side]["provenance"]
    code, out, err = cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--markdown", str(tmp_path / "c.md"))
    assert code == 0, err
    assert "simulated at time scale 0.05" in " ".join((out + err).split())
    md = (tmp_path / "c.md").read_text()
    assert md.count("simulated at time scale 0.05") == 2


def test_endpoint_run_without_a_declared_time_scale_says_whose_time_its_figures_are_in(
    cli: Run, tmp_path: Path
) -> None:
    base = run_in_thread(SimSettings(time_scale=0.05))
    spec = run_in_thread(SimSettings(time_scale=0.05, speculative=True))
    try:
        code, out, err = cli(
            "bench", "--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}",
            "--concurrency", "1", "--requests", "2", "--max-tokens", "16", "--prompts", "structured",
            "--out-dir", str(tmp_path), "--run-id", "ep1", "--no-report",
        )  # fmt: skip
    finally:
        base.stop()
        spec.stop()
    assert code == 0, err
    assert "figures in the servers' own time (simulators run at a time scale: pass it as --time-scale)" in " ".join(
        (out + err).split()
    )


def test_sweep_names_the_time_scale_in_every_output(cli: Run, tmp_path: Path) -> None:
    code, out, err = cli("sweep", "--local", "--windows", "5", "--concurrency", "2", "--requests", "4",
                         "--max-tokens", "16", "--prompts", "structured", "--time-scale", "0.05", "--sweep-id", "sw",
                         "--out-dir", str(tmp_path))  # fmt: skip
    assert code == 0, err
    note = "simulated at time scale 0.05: figures rescaled to real time"
    assert f"timing: {note}" in " ".join((out + err).split())
    sweep = tmp_path / "sw"
    assert json.loads((sweep / "analysis.json").read_text())["timing"] == [note]
    assert f"Timing: {note}." in (sweep / "sweep.md").read_text()
    assert f"Timing: {note}." in " ".join((sweep / "report" / "index.html").read_text().split())
