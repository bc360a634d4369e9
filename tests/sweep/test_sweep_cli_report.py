"""CLI usage errors, `spectrn compile --dry-run`, and the sweep report with divergence flagged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rich.console import Console

from spectrn.cli.show import print_sweep_analysis
from spectrn.configuration.config import SpectrnConfig
from spectrn.report.sweep import write_report
from spectrn.sweep.orchestrate import Sweep, SweepOptions
from support import run_cli

from .conftest import FakeRunner


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--windows", "5,x"], "--windows '5,x': 'x' is not valid"),
        (["--windows", "5,5"], "lists a value twice"),
        (["--drafts", "qwen3-9b"], "unknown model 'qwen3-9b'"),
        (["--mix", "structured"], "is not CLASS=WEIGHT"),
        (["--sweep-id", "a/b"], "not a safe folder name"),
        (["--resume"], "no sweep found"),
    ],
)
def test_sweep_usage_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["sweep", "--local", "--out-dir", str(tmp_path / "r"), *args], capsys)
    assert code == 2
    assert message in err


def test_compile_dry_run_prints_prerequisites_and_one_job_per_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(
        [
            "compile",
            "--dry-run",
            "--drafts",
            "qwen3-0.6b,qwen3-1.7b",
            "--windows",
            "7,15",
            "--set",
            "s3.bucket=my-models",
        ],
        capsys,
    )
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert len(jobs) == 5
    assert any(d["kind"] == "Namespace" for d in docs)
    code, _, err = run_cli(["compile", "--dry-run", "--set", "runtime=sim"], capsys)
    assert code == 2 and "nothing to compile" in err


def test_report_flags_divergence_prominently(sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: Console) -> None:
    sw = Sweep(
        sweep_cfg, "div", tmp_path, SweepOptions(drafts=["qwen3-1.7b"], windows=[5, 7], quiet=True), quiet_console
    )
    result = sw.run(lambda: FakeRunner(diverge={"qwen3-1.7b-k7@c4"}))
    eq = result.analysis.equivalence
    assert eq.compared == 24 and eq.matched == 23
    (d,) = eq.divergences
    assert (d.window, d.prompt_id, d.first_divergence) == (7, "p0", 5)
    html = write_report(sw.sweep_dir, result.analysis).read_text()
    assert "OUTPUT DIVERGENCE: 1 of 24" in html
    assert html.count("data:image/png;base64,") >= 1
    md = (sw.sweep_dir / "sweep.md").read_text()
    assert "OUTPUT DIVERGENCE" in md and "| qwen3-1.7b | 7 | c4 | p0 | 5 |" in md
    console = Console(record=True, width=200)
    print_sweep_analysis(result.analysis, console)
    text = console.export_text()
    assert "OUTPUT DIVERGENCE: 1 of 24" in text and "first differs at token 5" in text


def test_report_outlines_the_recommended_cells_and_references_nothing(
    sweep_cfg: SpectrnConfig, tmp_path: Path, quiet_console: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from html.parser import HTMLParser

    from spectrn.report import plots
    from spectrn.report.sweep import recommended_cells

    sw = Sweep(sweep_cfg, "rec", tmp_path, SweepOptions(drafts=["qwen3-0.6b", "qwen3-1.7b"], windows=[5, 7]),
               quiet_console)  # fmt: skip
    analysis = sw.run(lambda: FakeRunner()).analysis
    seen: list[dict[str, tuple[str, int]] | None] = []
    real = plots.sweep_heatmap

    def spy(*args: object, **kwargs: object) -> Path:
        seen.append(kwargs.get("recommended"))  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plots, "sweep_heatmap", spy)
    chosen = {r.scope: (r.chosen.draft, r.chosen.window) for r in analysis.recommendations
              if r.chosen and r.level == "c4"}  # fmt: skip
    assert chosen and recommended_cells(analysis, "c4") == chosen
    analysis.recommendations[0].text += " <script>alert(1)</script> ![x](http://evil.invalid/x.png)"
    html = write_report(sw.sweep_dir, analysis).read_text()
    assert seen == [chosen]  # the heatmap outlines the sweep's own recommendation per class
    assert "<script>" not in html and "&lt;script&gt;" in html

    class Refs(HTMLParser):
        refs: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.refs += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "action", "data")]

    parser = Refs()
    parser.feed(html)
    assert parser.refs and all(r.startswith("data:image/png;base64,") for r in parser.refs)
    assert "<table>" in html and "<h2>Recommendations</h2>" in html and "<strong>Output equivalence" in html
