"""Fixtures for the twin: a simulator with hidden parameters, benched over real HTTP, and the twin fitted to it.

The hidden simulator runs as two processes (baseline and speculative, like ``sweep --local``) serving a preset
file whose every cost and acceptance parameter differs from the calibrated ``qwen3-32b-trn2``; the bench is
spectrn's own load generator (``plan_from_config`` + ``execute``) and analysis (``finish``), so the twin sees
exactly what it would see from any run folder, with one difference: the records' times are the simulator's own
schedule (``sim_truth.replay_schedule``: a client with a perfect clock; its token counts are still the client's,
checked against the server's). These tests check the fit, and the fit's bounds (5%) hold only on timings that
are what the hidden model scheduled: on a loaded 2-core machine a starved simulator runs late for whole
stretches, which stretches the fitted costs themselves (one run: -6.6% to +202% on single costs), not noise a
fit could average out. How closely the client itself sees the schedule, quiet and loaded, is measured by
``benchmarks/loadgen_accuracy.py`` (docs/benchmarks.md). Time scale 0.2: steps of 6-25 ms of wall time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from sim_truth import replay_schedule
from spectrn.bench.local import endpoint_provenance, execute, plan_from_config
from spectrn.configuration.sources import build_config
from spectrn.errors import SimError
from spectrn.finish import finish
from spectrn.runtimes.launch import LocalServer, free_port, start_server, stop_servers, wait_healthy
from spectrn.sim.model import PRESETS
from spectrn.twin.calibrate import calibrate
from spectrn.twin.model import Twin, dump_twin

TIME_SCALE = 0.2
CAL_WINDOW = 9
BATCH = 16
MAX_TOKENS = 256
CAL_LEVELS = [4, 16]  # memory bound at 4, compute bound (speculative) at 16
CAL_REQUESTS = 64  # per level: enough decode steps that acceptance per class is known to about 1%

# Every value differs from qwen3-32b-trn2's; each term is large enough to matter in these runs (the KV terms
# too), so that the test asks the fit for all of them.
HIDDEN_COST = {
    "weights_read_s": 0.030,
    "kv_read_per_seq_s": 0.0006,
    "kv_read_per_token_s": 6e-6,
    "compute_per_token_s": 8e-4,
    "prefill_base_s": 0.080,
    "prefill_per_token_s": 0.0020,
}
HIDDEN_DRAFT = {"run_s": 0.005, "kv_read_per_token_s": 1e-6}
HIDDEN_ACCEPTANCE = {"alpha_structured": 0.90, "alpha_open": 0.40, "decay_tau": 6.0, "decay_gamma": 3.0}


def hidden_preset() -> dict[str, Any]:
    data = PRESETS["qwen3-32b-trn2"].model_dump(mode="json", exclude={"calibration"})
    data.update(name="hidden", description="hidden parameters for the twin's recovery test", max_num_seqs=BATCH,
                max_model_len=2048)  # fmt: skip
    data["cost"].update(HIDDEN_COST)
    data["acceptance"].update(HIDDEN_ACCEPTANCE)
    data["drafts"]["qwen3-1.7b"].update(HIDDEN_DRAFT)
    return data


@contextmanager
def sim_pair(preset: Path, window: int, logs: Path, *, seed: int = 0) -> Iterator[dict[str, str]]:
    """A baseline and a speculative simulator serving ``preset`` (subprocesses, stopped on exit)."""
    servers: list[LocalServer] = []
    try:
        for variant in ("baseline", "speculative"):
            port = free_port()
            cmd = [sys.executable, "-m", "spectrn", "sim", "serve", "--port", str(port), "--preset-file", str(preset),
                   "--time-scale", repr(TIME_SCALE), "--seed", str(seed)]  # fmt: skip
            if variant == "speculative":
                cmd += ["--speculative", "--window", str(window)]
            servers.append(start_server(f"simulator {variant}", cmd, port, logs / f"{variant}-k{window}.log"))
        wait_healthy(servers, 60, error=SimError, exited_hint=lambda s: f"see {s.log}", slow_hint="a loaded machine")
        yield {variant: s.url for variant, s in zip(("baseline", "speculative"), servers, strict=True)}
    finally:
        stop_servers(servers, grace_s=5.0)


def bench(urls: dict[str, str], out: Path, run_id: str, *, window: int, levels: list[int], requests: int,
          profile: str = "neuron-fork") -> Path:  # fmt: skip
    """spectrn's bench (all prompts, chat, greedy) against ``urls``, its times replayed from the servers'
    schedule, analysed; the run folder."""
    cfg = build_config({"runtime": "sim", "num_speculative_tokens": window, "max_num_seqs": BATCH,
                        "bench": {"requests": requests, "max_tokens": MAX_TOKENS, "concurrency": levels,
                                  "prompts": "all"}}, environ={})  # fmt: skip
    prov = endpoint_provenance(cfg, urls, runtime="sim", started=True, profile=profile, time_scale=TIME_SCALE)
    plan = plan_from_config(cfg, urls, run_id=run_id, out_root=out, model=cfg.target_spec.hf_id, provenance=prov)
    run_dir = execute(plan, cfg, Console(stderr=True, quiet=True), quiet=True).run_dir
    assert replay_schedule(run_dir, urls) >= 2 * requests * len(levels)
    finish(run_dir, report=False, emf=False)
    return run_dir


@dataclass
class Hidden:
    root: Path
    preset: Path
    calibration_run: Path
    twin: Twin
    twin_file: Path


@pytest.fixture(scope="package")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Hidden:
    """One window (9) at two loads on the hidden simulator, and the twin calibrated from that run alone."""
    root = tmp_path_factory.mktemp("twin")
    preset = root / "hidden.yaml"
    preset.write_text(yaml.safe_dump(hidden_preset(), sort_keys=False), encoding="utf-8")
    with sim_pair(preset, CAL_WINDOW, root / "logs") as urls:
        run = bench(urls, root / "runs", "calibration", window=CAL_WINDOW, levels=CAL_LEVELS, requests=CAL_REQUESTS)
    twin = calibrate([run])
    twin_file = root / "twin.yaml"
    twin_file.write_text(dump_twin(twin), encoding="utf-8")
    return Hidden(root, preset, run, twin, twin_file)
