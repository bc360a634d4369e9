"""A run that is not a performance result (vLLM on CPU with tiny models) says so first and leads with what it
does show: token accounting, acceptance, output equivalence. The vllm-cpu demo names the models that run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from spectrn.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "publish"))
from doubles.runfactory import make_run  # noqa: E402


def cpu_run(root: Path) -> Path:
    run_dir = make_run(root, "cpu-run", per_class=4, summary=False)
    meta = json.loads((run_dir / "run.json").read_text())
    meta["provenance"] = {"runtime": "vllm-cpu", "started_by_spectrn": True}
    (run_dir / "run.json").write_text(json.dumps(meta))
    return run_dir


def test_terminal_leads_with_the_verdict_and_correctness(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = cpu_run(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["analyze", str(run_dir)])
    assert e.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("NOT A PERFORMANCE RESULT: real vLLM on CPU with tiny models")  # before the table
    start = lines.index("correctness (what this run does show; the timings above are not performance figures):")
    block = lines[start + 1 : start + 5]
    assert block[0].startswith("  baseline: ") and "requests completed" in block[0] and "token accounting:" in block[0]
    assert block[1].startswith("  speculative: ")
    assert block[2].startswith("  acceptance: ") and "tokens per step" in block[2]
    assert block[3].startswith("  output equivalence: ")
    assert not [line for line in lines if "TPOT p50 speedup" in line]  # no speedup headline

    html = (run_dir / "report" / "index.html").read_text()
    banner = html.index('<div class="banner">NOT A PERFORMANCE RESULT')
    assert banner < html.index("<h2>Headline: correctness") < html.index("<h2>Configuration")
    assert "Headline: TPOT speedup" not in html
    assert "the configured qwen3-32b did not run" in html  # the config's models only label a vllm-cpu run
    md = (run_dir / "report" / "summary.md").read_text()
    assert "**NOT A PERFORMANCE RESULT" in md and "- acceptance: " in md and "TPOT p50 speedup" not in md


def test_a_performance_run_keeps_its_speedup_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "perf-run", per_class=8, summary=False)  # enough decode events
    with pytest.raises(SystemExit):
        main(["analyze", str(run_dir), "--no-report"])
    out = capsys.readouterr().out
    assert "structured: TPOT p50 speedup" in out and "NOT A PERFORMANCE RESULT" not in out


def test_the_vllm_cpu_demo_header_names_the_tiny_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spectrn.cli.bench_cmd import demo_header
    from spectrn.configuration.config import SpectrnConfig

    models = tmp_path / "models"
    for part, layers in (("target", 2), ("draft", 1)):
        (models / part).mkdir(parents=True)
        config = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": layers, "hidden_size": 128,
                  "vocab_size": 2048}  # fmt: skip
        (models / part / "config.json").write_text(json.dumps(config))
    (models / "build-info.json").write_text(json.dumps({"served_model_name": "tiny-qwen"}))
    monkeypatch.setenv("SPECTRN_VLLM_MODELS", str(models))
    cfg = SpectrnConfig(num_speculative_tokens=4)
    text = "\n".join(demo_header(cfg, "vllm-cpu", 0.25))
    assert "tiny-qwen" in text and "2048 tokens of context" in text and "window 4" in text
    assert "target: 2-layer Qwen3ForCausalLM" in text and "draft:  1-layer Qwen3ForCausalLM" in text
    assert "NOT A PERFORMANCE RESULT" in text
    assert "qwen3-32b" not in text and "qwen3-1.7b" not in text  # not the catalog models the config names
    sim = demo_header(cfg, "sim", 0.25)[0]
    assert "qwen3-32b baseline vs qwen3-1.7b draft" in sim and "time scale 0.25" in sim
