"""The streaming writers (EMF lines, llmperf-compatible files, the CDF plot's sample) against the in-memory ones."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

import pytest

from doubles.runfactory import make_run
from spectrn.finish import finish
from spectrn.publish.datums import default_metrics_fn
from spectrn.report import plots
from spectrn.run.folder import RunFolder

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "streaming"


def _demo(root: Path) -> Path:
    # the exact run the golden files were written from (see tests/fixtures/streaming/README.md)
    return make_run(root, "demo", per_class=8, tokens=150, errors=2, start=1_790_000_000.0)


def test_emf_and_llmperf_files_are_byte_identical_to_the_in_memory_writers(tmp_path: Path) -> None:
    run_dir = _demo(tmp_path)
    done = finish(run_dir, report=False)
    golden = sorted(p.relative_to(GOLDEN) for p in GOLDEN.rglob("*") if p.is_file() and p.name != "README.md")
    written = sorted(p.relative_to(run_dir) for p in [done.emf_path, *done.llmperf_files] if p is not None)
    assert written == golden
    for rel in golden:
        assert (run_dir / rel).read_bytes() == (GOLDEN / rel).read_bytes(), rel
    # what is compared includes continuation lines (ITL beyond EMF's 100 values) and error rows
    emf_docs = [json.loads(x) for x in (GOLDEN / "metrics.emf.jsonl").read_text().splitlines()]
    assert any("ITL" in d and "Errors" not in d for d in emf_docs)
    assert b'"error_code": 500' in b"".join((GOLDEN / r).read_bytes() for r in golden)


def test_write_emf_is_handed_lines_one_at_a_time_not_a_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = _demo(tmp_path)
    seen: list[str] = []
    real = RunFolder.write_emf

    def spy(self: RunFolder, lines: Iterable[str]) -> Path:
        seen.append(type(lines).__name__)
        assert not isinstance(lines, list | tuple), "all EMF lines were built before writing"
        return real(self, lines)

    monkeypatch.setattr(RunFolder, "write_emf", spy)
    finish(run_dir, report=False)
    assert seen == ["generator"]


def test_cdf_values_are_a_bounded_uniform_sample_of_the_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = RunFolder.open(_demo(tmp_path))
    metrics_fn = default_metrics_fn(1.0)
    population: dict[str, set[float]] = {}
    itl_population: dict[str, set[float]] = {}
    for rec in run.records():
        rm = metrics_fn(rec) if rec.ok else None
        if rm is not None:
            population.setdefault(rec.variant, set()).add(float(rm.ttft))
            itl_population.setdefault(rec.variant, set()).update(x for x in rm.itls if math.isfinite(x))
    monkeypatch.setattr(plots, "CDF_SAMPLE_REQUESTS", 5)
    monkeypatch.setattr(plots, "CDF_MAX_ITL_REQUESTS", 2)
    (level,) = plots.values_by_level(run, metrics_fn)  # the demo run has one load level
    values = plots.values_by_level(run, metrics_fn)[level]
    assert set(values) == set(population)
    for variant, d in values.items():
        assert len(population[variant]) > 5  # the run has more requests than the sample keeps
        assert len(d["ttft_s"]) == 5 and set(d["ttft_s"]) <= population[variant]
        assert 0 < len(d["itl_s"]) <= 2 * 149 and set(d["itl_s"]) <= itl_population[variant]
    # with room for everything, every request is drawn
    monkeypatch.setattr(plots, "CDF_SAMPLE_REQUESTS", 10_000)
    everything = plots.values_by_level(run, metrics_fn)[level]
    assert {v: set(d["ttft_s"]) for v, d in everything.items()} == population
