"""``spectrn sim``: serve as a process (the container entrypoint), presets, expect, and flag errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from spectrn.runtimes.launch import free_port
from support import spectrn


def test_serve_process_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "sim.yaml"
    cfg.write_text("acceptance:\n  alpha_open: 0.5\nfaults:\n  error_rate: 0.0\n")
    log = tmp_path / "serve.log"
    log_file = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectrn", "sim", "serve", "--port", str(port), "--speculative", "--window", "5"]
        + ["--time-scale", "0.05", "--served-model-name", "m", "--config-file", str(cfg), "--startup-delay", "0.3"]
        + ["--set", "cost.weights_read_s=0.05"],
        stdout=subprocess.DEVNULL,
        stderr=log_file,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        seen_503 = False
        while True:
            assert time.monotonic() < deadline, log.read_text()
            try:
                code = httpx.get(f"{base}/health").status_code
            except httpx.TransportError:
                time.sleep(0.05)
                continue
            seen_503 |= code == 503
            if code == 200:
                break
            time.sleep(0.02)
        assert seen_503
        info = httpx.get(f"{base}/sim/info").json()
        assert info["window"] == 5 and info["model_name"] == "m"
        assert info["preset"]["acceptance"]["alpha_open"] == 0.5 and info["preset"]["cost"]["weights_read_s"] == 0.05
        r = httpx.post(f"{base}/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 3})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log_file.close()
    assert proc.returncode in (0, -signal.SIGTERM)
    assert "spectrn sim: m [qwen3-32b-trn2, speculative (draft qwen3-1.7b, window 5)" in log.read_text()


def test_presets_and_expect() -> None:
    r = spectrn("sim", "presets")
    assert r.returncode == 0 and "qwen3-32b-trn2" in r.stdout
    r = spectrn("sim", "presets", "--json")
    assert json.loads(r.stdout)["qwen3-32b-trn2"]["drafts"]["qwen3-0.6b"]["quality"] == 0.4
    r = spectrn("sim", "expect", "--prompt", "counting numbers from 1 " * 10)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["speedup"] > 2.5 and len(out["position_accept_probs"]) == 6
    assert out["window_semantics"] == "nxdi" and out["max_tokens_per_step"] == 7 and out["crossover_concurrency"] > 4


def test_bad_flags_name_the_field(tmp_path: Path) -> None:
    r = spectrn("sim", "serve", "--port", str(free_port()), "--error-status", "404")
    assert r.returncode == 8 and "faults.error_status" in r.stderr
    r = spectrn("sim", "serve", "--set", "cost.nope=1")
    assert r.returncode == 2 and "cost has no parameter 'nope'" in r.stderr and "weights_read_s" in r.stderr
    r = spectrn("sim", "serve", "--set", "speed=1")
    assert r.returncode == 2 and "GROUP.NAME=VALUE" in r.stderr
    r = spectrn("sim", "serve", "--preset", "h100")
    assert r.returncode == 8 and "unknown simulator preset 'h100'" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("faults:\n  eror_rate: 1\n")
    r = spectrn("sim", "serve", "--config-file", str(bad))
    assert r.returncode == 8 and "faults.eror_rate: unknown key" in r.stderr
    r = spectrn("sim", "serve", "--draft", "qwen3-32b", "--speculative")
    assert r.returncode == 8 and "not smaller than the preset's target" in r.stderr


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        from spectrn.errors import SimError
        from spectrn.sim import SimSettings, run_in_thread

        try:
            run_in_thread(SimSettings(), port=port).stop()
        except SimError as e:
            assert "could not start on 127.0.0.1" in str(e)
        else:
            raise AssertionError("expected SimError")


def test_preset_file_round_trip_and_strict_errors(tmp_path: Path) -> None:
    r = spectrn("sim", "presets", "--yaml", "qwen3-32b-trn2")
    assert r.returncode == 0 and "profile: neuron-fork" in r.stdout and "compute_per_token_s:" in r.stdout
    fit = tmp_path / "fit.yaml"
    fit.write_text(
        r.stdout.replace("name: qwen3-32b-trn2", "name: my-fit").replace(
            "weights_read_s: 0.044", "weights_read_s: 0.05"
        )
    )
    r = spectrn("sim", "expect", "--preset-file", str(fit), "--prompt", "counting numbers from 1 " * 8)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["profile"] == "neuron-fork"
    # The file's cost is what the model runs (memory bound at batch 4: weights + 4 sequences + their context).
    assert 0.050 < out["baseline_tpot_s"] < 0.052
    bad = tmp_path / "bad.yaml"
    bad.write_text(r"name: x" + "\n" + fit.read_text().split("\n", 1)[1].replace("weights_read_s:", "weights_red_s:"))
    r = spectrn("sim", "serve", "--preset-file", str(bad))
    assert r.returncode == 8 and str(bad) in r.stderr and "cost.weights_red_s: unknown key" in r.stderr
    bad.write_text(fit.read_text().replace("profile: neuron-fork", "profile: neuron-v2"))
    r = spectrn("sim", "serve", "--preset-file", str(bad))
    assert r.returncode == 8 and str(bad) in r.stderr and "profile:" in r.stderr
    r = spectrn("sim", "serve", "--preset-file", str(tmp_path / "missing.yaml"))
    assert r.returncode != 0 and "missing.yaml does not exist" in r.stderr


def test_profile_flag_and_its_errors() -> None:
    r = spectrn("sim", "expect", "--profile", "upstream", "--prompt", "counting numbers from 1 " * 8)
    out = json.loads(r.stdout)
    assert out["window_semantics"] == "upstream" and out["max_tokens_per_step"] == 8
    assert len(out["position_accept_probs"]) == 7
    r = spectrn("sim", "serve", "--profile", "neuron-v2")
    assert r.returncode == 8 and "profile" in r.stderr and "neuron-fork" in r.stderr
    r = spectrn("sim", "serve", "--speculative", "--window", "1")
    assert r.returncode == 8 and "window: 1 proposes nothing under NxDI" in r.stderr
