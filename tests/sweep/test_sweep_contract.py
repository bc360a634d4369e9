"""The sweep's files are typed contracts: a real `spectrn sweep --local` writes sweep.json and analysis.json that
validate against docs/schemas/, and a sweep folder of the untyped layout (tests/fixtures/sweeps/) still loads,
resumes and is analyzed again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contract import assert_valid, assert_valid_sweep_folder
from spectrn.configuration.sources import build_config
from spectrn.errors import AnalysisError
from spectrn.run.sweep_analysis import ANALYSIS_SCHEMA_VERSION, read_sweep_analysis
from spectrn.run.sweep_manifest import SWEEP_SCHEMA_VERSION, read_sweep_manifest
from spectrn.sweep import orchestrate
from spectrn.sweep.manifest import read_manifest
from spectrn.sweep.orchestrate import Sweep, SweepOptions
from support import run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sweeps" / "schema1" / "fx"


def test_a_real_local_sweep_writes_files_that_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        ["sweep", "--local", "--quiet", "--no-report", "--prompts", "all", "--time-scale", "0.02", "--requests", "6",
         "--max-tokens", "24", "--concurrency", "2,4", "--drafts", "qwen3-0.6b", "--windows", "3,5",
         "--sweep-id", "sc", "--out-dir", tmp_path],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    analysis = assert_valid_sweep_folder(tmp_path / "sc")
    manifest = json.loads((tmp_path / "sc" / "sweep.json").read_text())
    assert manifest["schema_version"] == SWEEP_SCHEMA_VERSION and analysis["schema_version"] == ANALYSIS_SCHEMA_VERSION
    # 2 windows x 2 levels, each cell's rows: its classes plus 'all'
    assert sorted(manifest["cells"]) == [f"qwen3-0.6b-k{k}@c{c}" for k in (3, 5) for c in (2, 4)]
    assert {(r["window"], r["level"]) for r in analysis["rows"]} == {(k, f"c{c}") for k in (3, 5) for c in (2, 4)}
    assert analysis["crossovers"] and analysis["prediction"]["drafts"]
    # what the schema promises, the model reads back
    model = read_sweep_analysis(analysis, "analysis.json")
    assert [r.text for r in model.recommendations] == [r["text"] for r in analysis["recommendations"]]


def test_the_schema_refuses_what_the_model_would() -> None:
    raw = json.loads((FIXTURE / "analysis.json").read_text())
    raw["rows"][0]["speedup"] = "fast"
    with pytest.raises(AssertionError, match="rows/0/speedup"):
        assert_valid(raw, "analysis.schema.json")
    with pytest.raises(AnalysisError, match=r"analysis.json is not a sweep analysis: .*speedup"):
        read_sweep_analysis(raw, "analysis.json")
    newer = {**json.loads((FIXTURE / "sweep.json").read_text()), "schema_version": SWEEP_SCHEMA_VERSION + 1}
    with pytest.raises(AnalysisError, match="written by a newer spectrn"):
        read_sweep_manifest(newer, "sweep.json")


def test_a_sweep_folder_of_the_untyped_layout_loads() -> None:
    raw_manifest = json.loads((FIXTURE / "sweep.json").read_text())
    raw_analysis = json.loads((FIXTURE / "analysis.json").read_text())
    assert raw_manifest["version"] == 1 and "schema_version" not in raw_analysis  # the old layout, as written
    manifest = read_manifest(FIXTURE)
    assert manifest.schema_version == SWEEP_SCHEMA_VERSION
    assert list(manifest.cells) == list(raw_manifest["cells"])
    for key, cell in manifest.cells.items():
        assert (cell.run_dir, cell.clean) == (
            raw_manifest["cells"][key]["run_dir"],
            raw_manifest["cells"][key]["clean"],
        )
    analysis = read_sweep_analysis(raw_analysis, "analysis.json")
    assert [(r.draft, r.window, r.level, r.prompt_class, r.speedup) for r in analysis.rows] == [
        (r["draft"], r["window"], r["level"], r["prompt_class"], r["speedup"]) for r in raw_analysis["rows"]
    ]
    assert analysis.objective is not None and analysis.objective.name == raw_analysis["objective"]["name"]
    assert analysis.prediction.choice is not None
    assert analysis.prediction.choice.window == raw_analysis["prediction"]["choice"]["window"]


def test_an_untyped_sweep_resumes_and_is_analyzed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(FIXTURE, tmp_path / "fx")
    old = json.loads((FIXTURE / "analysis.json").read_text())
    # The fingerprint hashes every config key, and keys are added as spectrn grows: the fixture's is taken as
    # matching, since what is under test here is reading the old layout, not the fingerprint rule.
    monkeypatch.setattr(orchestrate, "fingerprint", lambda cfg: read_manifest(FIXTURE).fingerprint)
    cfg = build_config({"runtime": "sim", "bench": {"requests": 8, "max_tokens": 48, "concurrency": [2, 4],
                        "prompts": "all"}}, environ={})  # fmt: skip
    opts = SweepOptions(drafts=["qwen3-0.6b"], windows=[3, 5], weights={"structured": 1.0}, quiet=True)
    sw = Sweep(cfg, "fx", tmp_path, opts, resume=True)

    def no_runtime() -> None:
        raise AssertionError("every cell is finished: nothing may start a runtime")

    result = sw.run(no_runtime)  # type: ignore[arg-type]
    assert result.ran == [] and sorted(result.skipped) == sorted(old["cells"][i]["key"] for i in range(4))
    new = json.loads((tmp_path / "fx" / "analysis.json").read_text())  # rewritten in today's layout
    assert_valid(new, "analysis.schema.json")
    assert new["schema_version"] == ANALYSIS_SCHEMA_VERSION
    # sweep.json is rewritten (in today's layout) when a cell finishes; with none to run it stays as it was
    assert json.loads((tmp_path / "fx" / "sweep.json").read_text()) == json.loads((FIXTURE / "sweep.json").read_text())
    # the same cells give the same analysis
    assert [r["text"] for r in new["recommendations"]] == [r["text"] for r in old["recommendations"]]
    assert [c["text"] for c in new["crossovers"]] == [c["text"] for c in old["crossovers"]]
